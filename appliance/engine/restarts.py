"""The restart's downtime report (core/downtime.py), once the planner has caught up.

At boot the runtime reads the previous incarnation (before the boot reclaim marks it
ended) and takes back its runs; the planner then plans every occurrence the downtime
left behind, per catch-up policy, possibly over several passes. When its first pass with
nothing left over ends (``Planner.caught_up``), every occurrence scheduled before the
start has its row, and :func:`report_restart` tallies them (a read), records one
``appliance.restarted`` event and logs one line.
"""

from __future__ import annotations

import logging

import trio

from appliance.clock import WallClock
from appliance.core.downtime import DowntimeReport
from appliance.store.incarnations import PreviousIncarnation
from appliance.store.infra.backend import Store
from appliance.store.restarts import downtime_report, record_restart

log = logging.getLogger(__name__)


async def report_restart(
    *,
    db: Store,
    clock: WallClock,
    previous: PreviousIncarnation,
    restarted_at: int,
    reclaimed: int,
    restored_at: int | None,
    caught_up: trio.Event | None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> DowntimeReport:
    """Wait for ``caught_up`` (None: no planner runs, nothing to wait for), then record
    and log the report; returns it. ``restored_at``: when ``steeple restore`` put the
    database in place before this start (None: it was not restored)."""
    task_status.started()
    if caught_up is not None:
        await caught_up.wait()
    report = await db.read(
        downtime_report,
        previous=previous,
        restarted_at=restarted_at,
        reclaimed=reclaimed,
        restored_at=restored_at,
    )
    await db.write(record_restart, report=report, now=clock.now_ms())
    log.log(logging.WARNING if report.total_missed else logging.INFO, "%s", report.summary())
    return report
