"""The wall-clock seam: the only module that reads the system's time of day.

Wall time (epoch milliseconds, UTC) drives ``scheduled_for``, ``due_at`` and lease instants;
in-process deadlines use trio's monotonic clock. Tests inject ``TrioWallClock`` so that a
virtual ``trio.testing.MockClock`` moves wall time too, and can jump it like a bad NTP step.
"""

from __future__ import annotations

import time
from typing import Protocol

import trio


class WallClock(Protocol):
    def now_ms(self) -> int:
        """Current wall-clock time as integer milliseconds since the Unix epoch (UTC)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class TrioWallClock:
    """Wall time derived from trio's clock: ``start_ms`` plus elapsed trio time plus any
    jumps applied with :meth:`jump`. Must be read inside a trio run."""

    def __init__(self, start_ms: int) -> None:
        self._start_ms = start_ms
        self._trio_start: float | None = None
        self._offset_ms = 0

    def now_ms(self) -> int:
        current = trio.current_time()
        if self._trio_start is None:
            self._trio_start = current
        return self._start_ms + self._offset_ms + int((current - self._trio_start) * 1000)

    def jump(self, delta_ms: int) -> None:
        """Step the wall clock by ``delta_ms`` (negative = backwards) without moving trio's."""
        self._offset_ms += delta_ms


class SharedClock:
    """Another clock's reading corrected by an offset: the time the replicas of one
    PostgreSQL database share (docs/scale-out.md). The offset is the database's clock
    minus ``base``'s, measured by :func:`appliance.wiring.storage.follow_database_clock`, so
    replicas whose own clocks disagree by minutes still compare leases and due times on
    one timeline."""

    def __init__(self, base: WallClock, offset_ms: int = 0) -> None:
        self._base = base
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return self._base.now_ms() + self.offset_ms

    def base_ms(self) -> int:
        """The uncorrected reading (for measuring the offset)."""
        return self._base.now_ms()
