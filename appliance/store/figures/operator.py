"""The operator's health figures, computed in one place for their three faces: the
operator page ``/admin/health``, the gauges of ``GET /metrics`` and ``steeple status``
(docs/operations.md, "What to monitor"); and the active schedules by target the
boot-time destination audit reads.

One call reads everything in one snapshot: the gauges of :func:`health` (open runs and
planner lag from partial indexes), the recent rates — runs delivered and failed per
minute and the dispatch lateness p50/p99 of runs finished at their first attempt, over
the last ``WINDOW_MS`` (the newest ``LATENESS_SAMPLE`` of them) — the clock jumps of the
last day, the database and WAL sizes, the free disk, the last database check and the
last backup. Each query reads index ranges bounded by time (``job_runs_tenant_finished``,
one per tenant and state; ``events_tenant_type``), so the cost follows the recent rate
and the tenants, not the history. Finished runs, lateness and an event's count
follow :mod:`appliance.store.figures.basis`.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Final

from appliance.store.events import SYSTEM_TENANT
from appliance.store.figures.basis import (
    BY_TENANT_FINISHED,
    DAY_MS,
    ENDED_SQL,
    FINISHED_STATES_SQL,
    FIRST_ATTEMPT_JOIN,
    LATENESS_SQL,
    event_fields,
    occurrences,
)
from appliance.store.incarnations import last_check
from appliance.store.infra.connection import Connection, Sql
from appliance.store.infra.disk import Disk
from appliance.store.infra.schema import schema_version
from appliance.store.planning import PLAN_SQL, PLANNABLE_SQL, earliest_cursor
from appliance.store.restarts import LastRestart, last_restart

WINDOW_MS: Final = 5 * 60_000  # the rates and the lateness percentiles look this far back
JUMP_WINDOW_MS: Final = DAY_MS
LATENESS_SAMPLE: Final = 1_000  # newest first-attempt runs the percentiles are taken over

# The figures SQLite keeps as pragmas, read from PostgreSQL's own figures.
_PAGE_SIZE: Final = Sql(
    sqlite="PRAGMA page_size", postgres="SELECT CAST(current_setting('block_size') AS BIGINT)"
)
_PAGE_COUNT: Final = Sql(
    sqlite="PRAGMA page_count",
    postgres="SELECT pg_database_size(current_database())"
    " / CAST(current_setting('block_size') AS BIGINT)",
)
_FREELIST_COUNT: Final = Sql(sqlite="PRAGMA freelist_count", postgres="SELECT 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """Figures an operator watches (``steeple status``, ``/metrics``). Counts of open
    runs only: each comes from a partial index, so the cost does not grow with history."""

    schema_version: int
    tenants: int
    active_schedules: int  # live, unpaused, with a next occurrence, of an active tenant
    runs_pending: int  # pending or retry_wait, due or not
    runs_due: int  # of those, due now: waiting for a free slot
    runs_retrying: int  # of those, waiting for a retry (retry_wait), due or not
    runs_breaker_waiting: int  # of those, held by their target's open circuit breaker
    runs_running: int
    oldest_due_age_ms: int  # now − the earliest due_at among due runs; 0 when none
    planner_lag_ms: int  # now − the earliest plannable occurrence not yet planned; 0: none
    page_size: int
    page_count: int
    freelist_count: int
    last_start_ms: int | None  # when the current (or last) appliance process started
    last_restart: LastRestart | None  # the last restart's downtime report


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    health: Health
    db_bytes: int
    wal_bytes: int
    free_disk_bytes: int | None  # on the data directory's file system (None: PostgreSQL's)
    last_backup_ms: int | None
    last_check_ms: int | None  # the last database check (quick_check at boot) that passed
    delivered_per_minute: float  # runs succeeded, over the last WINDOW_MS
    failed_per_minute: float  # runs failed, over the last WINDOW_MS
    lateness_p50_ms: int | None  # first attempt's start − due_at; None: no run finished
    lateness_p99_ms: int | None
    clock_jumps_24h: int


def operator_figures(conn: Connection, *, disk: Disk, now: int) -> Figures:
    """The operator's figures; the store's size, WAL, free space and last backup as its
    ``disk`` says them (:mod:`appliance.store.infra.disk`)."""
    delivered, failed = _finished_counts(conn, since=now - WINDOW_MS)
    lateness = _lateness(conn, since=now - WINDOW_MS)
    minutes = WINDOW_MS / 60_000
    state = health(conn, now=now)
    return Figures(
        health=state,
        db_bytes=disk.db_bytes(state.page_size * state.page_count),
        wal_bytes=disk.wal_bytes(),
        free_disk_bytes=disk.free_bytes(),
        last_backup_ms=disk.last_backup_ms(),
        last_check_ms=last_check(conn),
        delivered_per_minute=round(delivered / minutes, 2),
        failed_per_minute=round(failed / minutes, 2),
        lateness_p50_ms=percentile(lateness, 50),
        lateness_p99_ms=percentile(lateness, 99),
        clock_jumps_24h=_clock_jumps(conn, since=now - JUMP_WINDOW_MS),
    )


def health(conn: Connection, *, now: int) -> Health:
    def one(sql: str, *args: object) -> int:
        row = conn.execute(sql, args).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    oldest_due = one(
        "SELECT min(due_at) FROM job_runs WHERE state IN ('pending', 'retry_wait') AND due_at <= ?",
        now,
    )
    next_fire = earliest_cursor(conn)
    started = conn.execute("SELECT max(started_at) FROM incarnations").fetchone()
    return Health(
        schema_version=schema_version(conn),
        tenants=one("SELECT count(*) FROM tenants"),
        active_schedules=one(f"SELECT count(*) FROM schedules WHERE {PLAN_SQL}"),
        runs_pending=one("SELECT count(*) FROM job_runs WHERE state IN ('pending', 'retry_wait')"),
        runs_due=one(
            "SELECT count(*) FROM job_runs WHERE state IN ('pending', 'retry_wait')"
            " AND due_at <= ?",
            now,
        ),
        runs_retrying=one(  # one seek of job_runs_tenant_state_time per tenant
            "SELECT count(*) FROM job_runs WHERE tenant_id IN (SELECT id FROM tenants)"
            " AND state = 'retry_wait'"
        ),
        runs_breaker_waiting=one(  # the same seeks, then the few retrying rows
            "SELECT count(*) FROM job_runs WHERE tenant_id IN (SELECT id FROM tenants)"
            " AND state = 'retry_wait' AND failure_reason = 'breaker_open'"
        ),
        runs_running=one("SELECT count(*) FROM job_runs WHERE state = 'running'"),
        oldest_due_age_ms=max(0, now - oldest_due) if oldest_due else 0,
        planner_lag_ms=max(0, now - next_fire) if next_fire else 0,
        page_size=one(_PAGE_SIZE.on(conn)),
        page_count=one(_PAGE_COUNT.on(conn)),
        freelist_count=one(_FREELIST_COUNT.on(conn)),
        last_start_ms=None if started is None or started[0] is None else int(started[0]),
        last_restart=last_restart(conn),
    )


def active_targets(conn: Connection, *, limit: int = 10_000) -> list[tuple[str, int]]:
    """(target URL, active schedules using it): live, unpaused, with a next occurrence
    (a suspended tenant's included: it may be resumed), most used first."""
    rows = conn.execute(
        f"SELECT target_url, count(*) FROM schedules WHERE {PLANNABLE_SQL}"
        " GROUP BY target_url ORDER BY count(*) DESC LIMIT ?",
        (limit,),
    )
    return [(str(url), int(count)) for url, count in rows]


def percentile(values: list[int], p: int) -> int | None:
    """The nearest-rank ``p``th percentile of ``values`` (sorted), or None when empty."""
    if not values:
        return None
    rank = max(1, -(-p * len(values) // 100))  # ceil(p/100 · n)
    return values[rank - 1]


def _finished_counts(conn: Connection, *, since: int) -> tuple[int, int]:
    """Runs succeeded and failed since ``since``: index entries only (one range of
    ``job_runs_tenant_finished`` per tenant and state)."""
    sql = (
        f"SELECT count(*) FROM job_runs {BY_TENANT_FINISHED.on(conn)} WHERE {FINISHED_STATES_SQL}"
        f" AND tenant_id IN (SELECT id FROM tenants) AND state = ? AND {ENDED_SQL} >= ?"
    )
    counted = []
    for state in ("succeeded", "failed"):
        row = conn.execute(sql, (state, since)).fetchone()
        counted.append(0 if row is None else int(row[0]))
    return counted[0], counted[1]


def _lateness_range(hint: str) -> str:
    """The newest runs of one tenant finished in one state at their first attempt: one
    range of ``job_runs_tenant_finished``, newest first (:mod:`~.basis`)."""
    return (
        f"SELECT COALESCE(r.finished_at, r.updated_at), {LATENESS_SQL} FROM job_runs r {hint}"
        f" JOIN {FIRST_ATTEMPT_JOIN} WHERE r.{FINISHED_STATES_SQL}"  # the index's condition
        " AND r.tenant_id = ? AND r.state = ? AND r.attempt = 1"
        " AND COALESCE(r.finished_at, r.updated_at) >= ?"
        " ORDER BY COALESCE(r.finished_at, r.updated_at) DESC LIMIT ?"
    )


LATENESS_RANGE: Final = Sql(
    sqlite=_lateness_range(BY_TENANT_FINISHED.sqlite),
    postgres=_lateness_range(BY_TENANT_FINISHED.postgres),
)


def _lateness(conn: Connection, *, since: int) -> list[int]:
    """The lateness of the newest ``LATENESS_SAMPLE`` runs finished (succeeded or failed)
    at their first attempt since ``since``, sorted: one index range per tenant and state,
    each newest first, merged until the sample is full (on SQLite a range's rows are read
    only as the merge reaches them, so it reads about the sample, not tenants × sample)."""
    tenants = [str(tid) for (tid,) in conn.execute("SELECT id FROM tenants")]
    ranges = [
        conn.execute(LATENESS_RANGE.on(conn), (tenant, state, since, LATENESS_SAMPLE))
        for tenant in tenants
        for state in ("succeeded", "failed")
    ]
    merged = heapq.merge(*ranges, key=lambda row: int(str(row[0])), reverse=True)
    newest = itertools.islice(merged, LATENESS_SAMPLE)
    return sorted(max(0, int(str(late))) for _, late in newest)


def _clock_jumps(conn: Connection, *, since: int) -> int:
    total = 0
    for occurred_at, data in conn.execute(
        "SELECT occurred_at, data FROM events WHERE tenant_id = ? AND type = ? ORDER BY seq DESC",
        (SYSTEM_TENANT, "clock.jump_detected"),
    ):
        if int(str(occurred_at)) < since:
            break
        total += occurrences(event_fields(data))
    return total
