"""Password hashing off the event loop, apart from everything else (docs/ui.md, "Security").

Rules this module guards:

- Hashing and verifying passwords (argon2id: tens of MiB and many milliseconds each) run
  in worker threads of their own, ``threads`` at a time, never under the limiter the
  dashboard, previews and schedule pages share (``UiContext.cpu``): sign-in work, which
  anyone may send without a session, cannot hold up signed-in pages.
- At most ``threads + waiting`` sign-ins or setups are admitted at once; one more is
  refused at once (:class:`HashingBusy`, a 503 with ``Retry-After``) instead of queueing
  without bound. Admission is counted on the trio thread, so the check and the count are
  one step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

import trio

T = TypeVar("T")
THREADS: Final = 1
WAITING: Final = 8
RETRY_AFTER_S: Final = 5


class HashingBusy(Exception):
    """Too many sign-ins are already waiting for a hashing thread."""


class HashingPool:
    """``threads`` worker threads for password work, and room for ``waiting`` more."""

    def __init__(self, *, threads: int = THREADS, waiting: int = WAITING) -> None:
        self.limiter = trio.CapacityLimiter(threads)  # held by each call while it runs
        self._room = threads + waiting
        self._admitted = 0

    @property
    def admitted(self) -> int:
        """Sign-ins or setups admitted and not yet finished."""
        return self._admitted

    @property
    def capacity(self) -> int:
        return self._room

    @property
    def queued(self) -> int:
        """Calls in a hashing thread or waiting for one."""
        statistics = self.limiter.statistics()
        return int(statistics.borrowed_tokens) + statistics.tasks_waiting

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold a place for one request's password work; HashingBusy when none is left."""
        if self._admitted >= self._room:
            raise HashingBusy
        self._admitted += 1
        try:
            yield
        finally:
            self._admitted -= 1

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in one of the pool's threads (call inside :meth:`admit`)."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)
