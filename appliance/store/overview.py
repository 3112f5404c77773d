"""What the web UI's dashboard and lists read that no API route reads yet: counts of a
tenant's runs and schedules, the schedules due next, a filtered page of schedule ids and
each schedule's last outcome (docs/ui.md, "Pages").

Every query is scoped by tenant and bounded: counts use the run indexes
(``job_runs_tenant_state_time``, ``job_runs_tenant_finished``; counts of finished runs stop
at ``COUNT_CAP``) and lists are keyset-paged by id.
Records are read through the store's own functions (``get_schedule``, ``list_events``),
so the UI shows the same values the API renders.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from appliance.core.events import Event
from appliance.core.runs import RunState
from appliance.core.schedules import Schedule
from appliance.store.events import SYSTEM_TENANT, list_events
from appliance.store.infra.connection import Connection, Sql
from appliance.store.runs import RUN_COLUMNS, RunRecord, state_list
from appliance.store.schedules import get_schedule

DAY_MS: Final = 86_400_000
FINISHED: Final = (RunState.SUCCEEDED, RunState.FAILED, RunState.MISSED, RunState.CANCELLED)
# Counts of finished runs stop here (shown as "10000+"): each is then at most this many
# entries of ``job_runs_tenant_finished``, whatever the rate.
COUNT_CAP: Final = 10_000
# A tenant's runs finished in a state since a time: a range of ``job_runs_tenant_finished``
# (its condition and expression literally). Parameters: tenant_id, state, since.
# Named: with statistics, the planner may otherwise prefer the time-only index
# ``job_runs_finished`` and read a table row per run of every tenant in the range.
# PostgreSQL's planner picks its own index.
_BY_TENANT_FINISHED: Final = Sql(sqlite="INDEXED BY job_runs_tenant_finished", postgres="")
_FINISHED_STATES: Final = "state IN ('cancelled', 'failed', 'missed', 'succeeded')"
_ENDED: Final = "COALESCE(finished_at, updated_at)"


def _finished_since(hint: str) -> str:
    return (
        f"SELECT 1 FROM job_runs {hint} WHERE {_FINISHED_STATES}"
        f" AND tenant_id = ? AND state = ? AND {_ENDED} >= ?"
    )


FINISHED_SINCE_SQL: Final = Sql(
    sqlite=_finished_since(_BY_TENANT_FINISHED.sqlite),
    postgres=_finished_since(_BY_TENANT_FINISHED.postgres),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    due_24h: int  # live, unpaused schedules whose next occurrence is within 24 h
    delivered_24h: int  # runs that succeeded in the last 24 h (at most COUNT_CAP + 1)
    failed_24h: int  # runs that failed in the last 24 h (at most COUNT_CAP + 1)
    retrying: int  # runs waiting for their next attempt now
    paused: int  # paused schedules


class Status(enum.StrEnum):
    ANY = ""
    ACTIVE = "active"
    PAUSED = "paused"


def counts(conn: Connection, *, tenant_id: str, now: int) -> Counts:
    def one(sql: str, *params: object) -> int:
        row = conn.execute(sql, params).fetchone()
        return int(row[0]) if row else 0

    live = "FROM schedules WHERE tenant_id = ? AND deleted_at IS NULL"
    finished = f"SELECT count(*) FROM ({FINISHED_SINCE_SQL.on(conn)} LIMIT {COUNT_CAP + 1}) capped"
    return Counts(
        due_24h=one(
            f"SELECT count(*) {live} AND paused = 0 AND next_fire_at < ?", tenant_id, now + DAY_MS
        ),
        delivered_24h=one(finished, tenant_id, str(RunState.SUCCEEDED), now - DAY_MS),
        failed_24h=one(finished, tenant_id, str(RunState.FAILED), now - DAY_MS),
        retrying=one(
            "SELECT count(*) FROM job_runs WHERE tenant_id = ? AND state = ?",
            tenant_id,
            str(RunState.RETRY_WAIT),
        ),
        paused=one(f"SELECT count(*) {live} AND paused = 1", tenant_id),
    )


def next_due(conn: Connection, *, tenant_id: str, limit: int) -> list[Schedule]:
    """The live, unpaused schedules that fire soonest, soonest first."""
    rows = conn.execute(
        "SELECT id FROM schedules WHERE tenant_id = ? AND deleted_at IS NULL AND paused = 0"
        " AND next_fire_at IS NOT NULL ORDER BY next_fire_at, id LIMIT ?",
        (tenant_id, limit),
    ).fetchall()
    return _schedules(conn, tenant_id, [str(row[0]) for row in rows])


# A substring test: PostgreSQL says SQLite's instr as strpos.
_NAME_CONTAINS: Final = Sql(
    sqlite=" AND instr(lower(name), ?) > 0", postgres=" AND strpos(lower(name), ?) > 0"
)


def find_schedules(
    conn: Connection,
    *,
    tenant_id: str,
    status: Status,
    name_contains: str,
    limit: int,
    after_id: str | None = None,
) -> list[Schedule]:
    """A page of live schedules by id, filtered by status and a name substring
    (case-insensitive)."""
    sql = "SELECT id FROM schedules WHERE tenant_id = ? AND deleted_at IS NULL"
    params: list[object] = [tenant_id]
    if status is not Status.ANY:
        sql += " AND paused = ?"
        params.append(int(status is Status.PAUSED))
    if name_contains:
        sql += _NAME_CONTAINS.on(conn)
        params.append(name_contains.lower())
    if after_id is not None:
        sql += " AND id > ?"
        params.append(after_id)
    rows = conn.execute(sql + " ORDER BY id LIMIT ?", [*params, limit]).fetchall()
    return _schedules(conn, tenant_id, [str(row[0]) for row in rows])


def last_outcome(conn: Connection, *, schedule_id: str) -> RunRecord | None:
    """The newest finished run of a schedule (by occurrence), or None."""
    row = conn.execute(
        f"SELECT {RUN_COLUMNS.select} FROM job_runs WHERE schedule_id = ?"
        f" AND state IN {state_list(FINISHED)} ORDER BY scheduled_for DESC LIMIT 1",
        (schedule_id,),
    ).fetchone()
    return None if row is None else RUN_COLUMNS.one(row)


def attention(conn: Connection, *, tenant_id: str, now: int, limit: int) -> list[RunRecord]:
    """Runs of the last 24 h that failed or were missed, newest (by when they ended)
    first. The pick reads index entries only; just the ``limit`` rows shown are read."""
    rows = conn.execute(
        f"SELECT {RUN_COLUMNS.select} FROM job_runs WHERE rowid IN"
        f" (SELECT rowid FROM job_runs {_BY_TENANT_FINISHED.on(conn)} WHERE {_FINISHED_STATES}"
        f" AND tenant_id = ? AND state IN {state_list((RunState.FAILED, RunState.MISSED))}"
        f" AND {_ENDED} >= ? ORDER BY {_ENDED} DESC LIMIT ?) ORDER BY {_ENDED} DESC",
        (tenant_id, now - DAY_MS, limit),
    )
    return RUN_COLUMNS.all(rows)


def recent_events(conn: Connection, *, tenant_id: str, limit: int) -> list[Event]:
    """The tenant's newest ``limit`` feed events (its own and the system's), oldest first,
    read through the feed's own :func:`list_events`."""
    row = conn.execute(
        "SELECT seq FROM events WHERE tenant_id IN (?, ?) ORDER BY seq DESC LIMIT 1 OFFSET ?",
        (tenant_id, SYSTEM_TENANT, limit - 1),
    ).fetchone()
    after = 0 if row is None else int(row[0]) - 1
    return list_events(conn, tenant_id=tenant_id, after=after, limit=limit)


def _schedules(conn: Connection, tenant_id: str, ids: list[str]) -> list[Schedule]:
    found = (get_schedule(conn, tenant_id=tenant_id, schedule_id=i) for i in ids)
    return [schedule for schedule in found if schedule is not None]


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantSummary:
    """One line of the operator's tenant list: counts only, never a secret."""

    id: str
    name: str
    created_at: int
    schedules: int
    users: int
    failed_24h: int  # at most COUNT_CAP + 1
    suspended_at: int | None  # None: active


def tenant_summaries(conn: Connection, *, now: int) -> list[TenantSummary]:
    """Every tenant (the ``system`` one excluded) by name, with its live schedules, users
    and runs failed in the last 24 h."""
    rows = conn.execute(
        "SELECT t.id, t.name, t.created_at, t.suspended_at,"
        " (SELECT count(*) FROM schedules s WHERE s.tenant_id = t.id AND s.deleted_at IS NULL),"
        " (SELECT count(*) FROM users u WHERE u.tenant_id = t.id),"
        f" (SELECT count(*) FROM (SELECT 1 FROM job_runs r {_BY_TENANT_FINISHED.on(conn)}"
        "  WHERE r.state IN"
        "  ('cancelled', 'failed', 'missed', 'succeeded') AND r.tenant_id = t.id"
        "  AND r.state = 'failed' AND COALESCE(r.finished_at, r.updated_at) >= ?"
        f"  LIMIT {COUNT_CAP + 1}) capped)"
        " FROM tenants t WHERE t.id != ? ORDER BY t.name, t.id",
        (now - DAY_MS, SYSTEM_TENANT),
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
