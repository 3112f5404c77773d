"""The systemd watchdog's pet: ``WATCHDOG=1`` only while the appliance can still write
(:mod:`appliance.wiring.sdnotify` sends it; :class:`appliance.core.lifecycle.Lifecycle`
says whether the engine runs)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from appliance.core.lifecycle import Lifecycle


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
