"""Read-only figures about the database for operators: the boot-time destination audit,
``steeple status`` and ``/metrics``. Each query is one short read over indexed columns or
the whole of a small table; none takes a per-schedule or per-run parameter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import apsw

from appliance.store.infra.connection import Connection, Sql
from appliance.store.planning import PLAN_SQL
from appliance.store.restarts import LastRestart, last_restart

# The figures SQLite keeps as pragmas, read from PostgreSQL's own figures.
_SCHEMA_VERSION: Final = Sql(
    sqlite="PRAGMA user_version", postgres="SELECT version FROM steeple_schema"
)
_PAGE_SIZE: Final = Sql(
    sqlite="PRAGMA page_size", postgres="SELECT CAST(current_setting('block_size') AS BIGINT)"
)
_PAGE_COUNT: Final = Sql(
    sqlite="PRAGMA page_count",
    postgres="SELECT pg_database_size(current_database())"
    " / CAST(current_setting('block_size') AS BIGINT)",
)
_FREELIST_COUNT: Final = Sql(sqlite="PRAGMA freelist_count", postgres="SELECT 0")
_JOURNAL_MODE: Final = Sql(sqlite="PRAGMA journal_mode", postgres="SELECT 'postgresql'")


def active_targets(conn: Connection, *, limit: int = 10_000) -> list[tuple[str, int]]:
    """(target URL, active schedules using it): live, unpaused, with a next occurrence."""
    rows = conn.execute(
        "SELECT target_url, count(*) FROM schedules WHERE deleted_at IS NULL AND paused = 0"
        " AND next_fire_at IS NOT NULL GROUP BY target_url ORDER BY count(*) DESC LIMIT ?",
        (limit,),
    )
    return [(str(url), int(count)) for url, count in rows]


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


def health(conn: Connection, *, now: int) -> Health:
    def one(sql: str, *args: object) -> int:
        row = conn.execute(sql, args).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    oldest_due = one(
        "SELECT min(due_at) FROM job_runs WHERE state IN ('pending', 'retry_wait') AND due_at <= ?",
        now,
    )
    next_fire = one(f"SELECT min(next_fire_at) FROM schedules WHERE {PLAN_SQL}")
    started = conn.execute("SELECT max(started_at) FROM incarnations").fetchone()
    return Health(
        schema_version=one(_SCHEMA_VERSION.on(conn)),
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


def sqlite_version() -> str:
    return apsw.sqlite_lib_version()


def journal_mode(conn: Connection) -> str:
    row = conn.execute(_JOURNAL_MODE.on(conn)).fetchone()
    return "unknown" if row is None else str(row[0])


def quick_check(conn: Connection) -> list[str]:
    """``PRAGMA quick_check``: ``["ok"]`` or the first problems found."""
    return [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
