"""Where the running appliance is in its life, as ``/readyz`` and the systemd watchdog see
it. The runtime sets it; nothing else does. The watchdog's pet (:func:`pet_watchdog`)
lives here too: it is the other reader of this state."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio


@dataclass(slots=True, kw_only=True)
class Lifecycle:
    """Mutable on purpose: one per process, written by the runtime as it starts and stops.
    The database has migrated before one exists (it is made after ``Database.open``)."""

    engine_running: bool = False  # every engine service started, none has stopped
    draining: bool = False  # the first SIGTERM/SIGINT arrived: take this one out of rotation

    @property
    def ready(self) -> bool:
        return self.engine_running and not self.draining


async def pet_watchdog(
    lifecycle: Lifecycle,
    round_trip: Callable[[], Awaitable[None]],
    interval_s: float,
    notify: Callable[[str], object],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Send ``WATCHDOG=1`` every ``interval_s`` while the engine runs and ``round_trip``
    (a write through the single writer) completes within the interval; otherwise stay
    silent, so systemd restarts a wedged appliance instead of a timer keeping it alive."""
    task_status.started()
    while True:
        started = trio.current_time()
        with trio.move_on_after(interval_s):
            await round_trip()
            if lifecycle.engine_running:
                notify("WATCHDOG=1")
        await trio.sleep_until(started + interval_s)
