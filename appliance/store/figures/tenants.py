"""One tenant's counts: the dashboard's (:func:`counts`) and each line of the operator's
tenant list, ``/admin/tenants`` (:func:`tenant_summaries`) (docs/ui.md, "Pages").

Every count is scoped by tenant and bounded: counts of runs use the run indexes
(``job_runs_tenant_state_time``, ``job_runs_tenant_finished``) and counts of finished
runs stop at ``COUNT_CAP`` (:data:`FINISHED_SINCE_SQL`, the one query both faces count
"failed in the last 24 h" with; finished runs follow :mod:`appliance.store.figures.basis`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.core.runs import RunState
from appliance.store.events import SYSTEM_TENANT
from appliance.store.figures.basis import (
    BY_TENANT_FINISHED,
    DAY_MS,
    ENDED_SQL,
    FINISHED_STATES_SQL,
)
from appliance.store.infra.connection import Connection, Sql

# Counts of finished runs stop here (shown as "10000+"): each is then at most this many
# entries of ``job_runs_tenant_finished``, whatever the rate.
COUNT_CAP: Final = 10_000


def _finished_since(tenant: str, hint: str) -> str:
    """A tenant's runs finished in a state since a time: a range of
    ``job_runs_tenant_finished`` (its condition and expression literally). ``tenant``:
    the SQL of the tenant's id; then parameters state, since. ``hint``: the index
    named on SQLite (:data:`~appliance.store.figures.basis.BY_TENANT_FINISHED`)."""
    return (
        f"SELECT 1 FROM job_runs {hint} WHERE {FINISHED_STATES_SQL}"
        f" AND tenant_id = {tenant} AND state = ? AND {ENDED_SQL} >= ?"
    )


def _capped(conn: Connection, tenant: str) -> str:
    """How many of :func:`_finished_since`'s runs, counting at most ``COUNT_CAP + 1``."""
    since = _finished_since(tenant, BY_TENANT_FINISHED.on(conn))
    return f"SELECT count(*) FROM ({since} LIMIT {COUNT_CAP + 1}) capped"


# Parameters: tenant_id, state, since.
FINISHED_SINCE_SQL: Final = Sql(
    sqlite=_finished_since("?", BY_TENANT_FINISHED.sqlite),
    postgres=_finished_since("?", BY_TENANT_FINISHED.postgres),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    due_24h: int  # live, unpaused schedules whose next occurrence is within 24 h
    delivered_24h: int  # runs that succeeded in the last 24 h (at most COUNT_CAP + 1)
    failed_24h: int  # runs that failed in the last 24 h (at most COUNT_CAP + 1)
    retrying: int  # runs waiting for their next attempt now
    paused: int  # paused schedules


def counts(conn: Connection, *, tenant_id: str, now: int) -> Counts:
    def one(sql: str, *params: object) -> int:
        row = conn.execute(sql, params).fetchone()
        return int(row[0]) if row else 0

    live = "FROM schedules WHERE tenant_id = ? AND deleted_at IS NULL"
    return Counts(
        due_24h=one(
            f"SELECT count(*) {live} AND paused = 0 AND next_fire_at < ?", tenant_id, now + DAY_MS
        ),
        delivered_24h=one(_capped(conn, "?"), tenant_id, str(RunState.SUCCEEDED), now - DAY_MS),
        failed_24h=one(_capped(conn, "?"), tenant_id, str(RunState.FAILED), now - DAY_MS),
        retrying=one(
            "SELECT count(*) FROM job_runs WHERE tenant_id = ? AND state = ?",
            tenant_id,
            str(RunState.RETRY_WAIT),
        ),
        paused=one(f"SELECT count(*) {live} AND paused = 1", tenant_id),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantSummary:
    """One line of the operator's tenant list: counts only, never a secret."""

    id: str
    name: str
    created_at: int
    schedules: int
    users: int
    failed_24h: int  # at most COUNT_CAP + 1, counted as the tenant's dashboard counts it
    suspended_at: int | None  # None: active


def tenant_summaries(conn: Connection, *, now: int) -> list[TenantSummary]:
    """Every tenant (the ``system`` one excluded) by name, with its live schedules, users
    and runs failed in the last 24 h."""
    rows = conn.execute(  # a run's unqualified columns: the innermost table, job_runs
        "SELECT t.id, t.name, t.created_at, t.suspended_at,"
        " (SELECT count(*) FROM schedules s WHERE s.tenant_id = t.id AND s.deleted_at IS NULL),"
        " (SELECT count(*) FROM users u WHERE u.tenant_id = t.id),"
        f" ({_capped(conn, 't.id')})"
        " FROM tenants t WHERE t.id != ? ORDER BY t.name, t.id",
        (str(RunState.FAILED), now - DAY_MS, SYSTEM_TENANT),
    )
    return [
        TenantSummary(
            id=str(tenant_id),
            name=str(name),
            created_at=int(created_at),
            schedules=int(schedules),
            users=int(users),
            failed_24h=int(failed),
            suspended_at=None if suspended is None else int(suspended),
        )
        for tenant_id, name, created_at, suspended, schedules, users, failed in rows
    ]
