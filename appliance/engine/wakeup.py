"""A wake-up call between trio tasks: "something changed, look again".

A service sleeps in :meth:`Wakeup.wait` until its own next deadline or until another task
calls :meth:`Wakeup.nudge` (the API after a schedule change, the planner after it
materialised runs, a delivery that freed a slot). Nudges are never lost: one that arrives
while the service is busy makes its next ``wait`` return at once. Several nudges before a
``wait`` count as one.
"""

from __future__ import annotations

import trio


class Wakeup:
    def __init__(self) -> None:
        self._event = trio.Event()

    def nudge(self) -> None:
        """Wake the waiter (now, or at its next wait). Sync; call from any trio task."""
        self._event.set()

    async def wait(self, deadline: float) -> bool:
        """Sleep until ``deadline`` (trio time, seconds) or a nudge; True if nudged."""
        with trio.move_on_at(deadline):
            await self._event.wait()
        nudged = self._event.is_set()
        if nudged:
            self._event = trio.Event()
        return nudged
