"""The numbers behind the web UI's charts (docs/ui.md, "Dashboard", "A schedule's page"):
a tenant's deliveries and lateness per hour over the last day, and one schedule's recent
runs with their lateness.

Rules this module guards:

- One aggregate query per chart, the same SQL on both stores except the index hint
  (:data:`~appliance.store.figures.basis.BY_TENANT_FINISHED`, an explicit pair); no
  SQLite-only form (no ``MAX(a, b)``, no boolean sums): docs/adr/0044-postgresql-store.md.
- Finished runs, their instant and lateness follow :mod:`appliance.store.figures.basis`:
  a run counts in the hour it ended (``COALESCE(finished_at, updated_at)``), read as one
  range of ``job_runs_tenant_finished``; lateness is that of runs finished at their first
  attempt (``a.started_at - r.due_at``, negative read as 0), as the operator's figures.
- Hours are whole UTC hours (epoch ms // ``HOUR_MS``); the window is the ``HOURS`` hours
  ending with the one ``now`` is in. An hour with nothing in it is absent from a result:
  the charts draw it empty.
- Percentiles are nearest-rank (the smallest value whose rank is at least ``p``% of the
  hour's count), the rule of the operator's ``percentile``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.core.runs import RunState
from appliance.store.figures.basis import (
    BY_TENANT_FINISHED,
    ENDED_SQL,
    FINISHED_STATES_SQL,
    FIRST_ATTEMPT_JOIN,
    LATENESS_SQL,
)
from appliance.store.infra.connection import Connection

HOUR_MS: Final = 3_600_000
HOURS: Final = 24
STRIP_RUNS: Final = 30  # a schedule page's strip: its newest runs


@dataclass(frozen=True, slots=True, kw_only=True)
class HourDeliveries:
    hour: int  # epoch ms of the hour's start
    succeeded: int  # succeeded at their first attempt
    retried: int  # succeeded after more than one attempt
    failed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HourLateness:
    hour: int  # epoch ms of the hour's start
    runs: int  # runs finished at their first attempt in the hour
    p50_ms: int
    p95_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StripRun:
    id: str
    state: RunState
    scheduled_for: int
    attempts: int
    lateness_ms: int | None  # None: not finished at its first attempt


def window_start(now: int) -> int:
    """The first hour of the window ending with the hour ``now`` is in."""
    return (now // HOUR_MS - (HOURS - 1)) * HOUR_MS


def _deliveries_sql(conn: Connection) -> str:
    return (
        f"SELECT {ENDED_SQL} / {HOUR_MS} AS hour,"
        " SUM(CASE WHEN state = 'succeeded' AND attempt <= 1 THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN state = 'succeeded' AND attempt > 1 THEN 1 ELSE 0 END),"
        " SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END)"
        f" FROM job_runs {BY_TENANT_FINISHED.on(conn)} WHERE {FINISHED_STATES_SQL}"
        f" AND tenant_id = :tenant AND state IN ('succeeded', 'failed') AND {ENDED_SQL} >= :since"
        " GROUP BY hour ORDER BY hour"
    )


def deliveries_per_hour(conn: Connection, *, tenant_id: str, now: int) -> list[HourDeliveries]:
    """The tenant's runs that ended succeeded or failed in each hour of the window, oldest
    hour first; hours with none are absent."""
    rows = conn.execute(_deliveries_sql(conn), {"tenant": tenant_id, "since": window_start(now)})
    return [
        HourDeliveries(
            hour=int(hour) * HOUR_MS, succeeded=int(ok), retried=int(re), failed=int(bad)
        )
        for hour, ok, re, bad in rows
    ]


def _lateness_sql(conn: Connection) -> str:
    late = f"CASE WHEN {LATENESS_SQL} < 0 THEN 0 ELSE {LATENESS_SQL} END"
    first = (
        f"SELECT COALESCE(r.finished_at, r.updated_at) / {HOUR_MS} AS hour, {late} AS late"
        f" FROM job_runs r {BY_TENANT_FINISHED.on(conn)} JOIN {FIRST_ATTEMPT_JOIN}"
        " WHERE r.state IN ('cancelled', 'failed', 'missed', 'succeeded')"  # the index's
        " AND r.tenant_id = :tenant AND r.state IN ('succeeded', 'failed') AND r.attempt = 1"
        " AND COALESCE(r.finished_at, r.updated_at) >= :since"
    )
    ranked = (
        "SELECT hour, late, ROW_NUMBER() OVER (PARTITION BY hour ORDER BY late) AS rn,"
        f" COUNT(*) OVER (PARTITION BY hour) AS n FROM ({first}) f"
    )
    return (
        "SELECT hour, n, MIN(CASE WHEN rn * 100 >= n * 50 THEN late END),"
        " MIN(CASE WHEN rn * 100 >= n * 95 THEN late END)"
        f" FROM ({ranked}) ranked GROUP BY hour, n ORDER BY hour"
    )


def lateness_per_hour(conn: Connection, *, tenant_id: str, now: int) -> list[HourLateness]:
    """p50 and p95 of the lateness of the tenant's runs finished at their first attempt,
    per hour of the window, oldest first; hours with none are absent."""
    rows = conn.execute(_lateness_sql(conn), {"tenant": tenant_id, "since": window_start(now)})
    return [
        HourLateness(hour=int(hour) * HOUR_MS, runs=int(n), p50_ms=int(p50), p95_ms=int(p95))
        for hour, n, p50, p95 in rows
    ]


_STRIP_SQL: Final = (
    "SELECT r.id, r.state, r.scheduled_for, r.attempt,"
    f" CASE WHEN r.attempt = 1 AND r.state IN ('succeeded', 'failed') THEN {LATENESS_SQL} END"
    " FROM job_runs r LEFT JOIN attempts a ON a.run_id = r.id AND a.attempt = 1"
    " WHERE r.schedule_id = :schedule AND r.tenant_id = :tenant"
    " ORDER BY r.scheduled_for DESC LIMIT :most"
)


def schedule_strip(
    conn: Connection, *, tenant_id: str, schedule_id: str, most: int = STRIP_RUNS
) -> list[StripRun]:
    """The schedule's newest ``most`` runs, oldest first (the strip reads left to right),
    with their lateness: one range of ``UNIQUE (schedule_id, scheduled_for)``."""
    rows = conn.execute(
        _STRIP_SQL, {"schedule": schedule_id, "tenant": tenant_id, "most": most}
    ).fetchall()
    return [
        StripRun(
            id=str(run_id),
            state=RunState(str(state)),
            scheduled_for=int(scheduled_for),
            attempts=int(attempt),
            lateness_ms=None if late is None else max(0, int(late)),
        )
        for run_id, state, scheduled_for, attempt, late in reversed(rows)
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardFigures:
    start: int  # the window's first hour
    deliveries: list[HourDeliveries]
    lateness: list[HourLateness]


def dashboard_figures(conn: Connection, *, tenant_id: str, now: int) -> DashboardFigures:
    """Both dashboard charts' figures, read in one snapshot."""
    return DashboardFigures(
        start=window_start(now),
        deliveries=deliveries_per_hour(conn, tenant_id=tenant_id, now=now),
        lateness=lateness_per_hour(conn, tenant_id=tenant_id, now=now),
    )
