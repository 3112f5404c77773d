"""The lists the web UI's pages show that no API route reads: the schedules due next, a
filtered page of schedules and each one's last outcome, the runs needing attention, the
newest events of the feed (docs/ui.md, "Pages"). The counts beside them are figures:
:mod:`appliance.store.figures.tenants`.

Every query is scoped by tenant and bounded: lists are keyset-paged by id or cut at a
limit, and the runs needing attention are a range of ``job_runs_tenant_finished``
(finished runs as :mod:`appliance.store.figures.basis` reads them). Records are read
through the store's own functions (``get_schedule``, ``list_events``), so the UI shows
the same values the API renders.
"""

from __future__ import annotations

import enum
from typing import Final

from appliance.core.events import Event
from appliance.core.runs import TERMINAL, RunState
from appliance.core.schedules import Schedule, ScheduleStatus
from appliance.store.events import SYSTEM_TENANT, list_events
from appliance.store.figures.basis import (
    BY_TENANT_FINISHED,
    DAY_MS,
    ENDED_SQL,
    FINISHED_STATES_SQL,
)
from appliance.store.infra.connection import Connection, Sql
from appliance.store.runs import RUN_COLUMNS, RunRecord, state_list
from appliance.store.schedules import get_schedule


class Status(enum.StrEnum):
    """The list's status filter: any, or one :class:`ScheduleStatus`."""

    ANY = ""
    ACTIVE = ScheduleStatus.ACTIVE.value
    PAUSED = ScheduleStatus.PAUSED.value
    COMPLETED = ScheduleStatus.COMPLETED.value


# ``core.schedules.schedule_status`` in SQL: paused wins, then no next occurrence is
# completed.
_STATUS_SQL: Final = {
    Status.ACTIVE: " AND paused = 0 AND next_fire_at IS NOT NULL",
    Status.PAUSED: " AND paused = 1",
    Status.COMPLETED: " AND paused = 0 AND next_fire_at IS NULL",
}


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
    sql += _STATUS_SQL.get(status, "")
    if name_contains:
        sql += _NAME_CONTAINS.on(conn)
        params.append(name_contains.lower())
    if after_id is not None:
        sql += " AND id > ?"
        params.append(after_id)
    rows = conn.execute(sql + " ORDER BY id LIMIT ?", [*params, limit]).fetchall()
    return _schedules(conn, tenant_id, [str(row[0]) for row in rows])


# A run waiting to retry has an outcome already: its last attempt failed.
_OUTCOME_STATES: Final = TERMINAL | {RunState.RETRY_WAIT}


def last_outcome(conn: Connection, *, schedule_id: str) -> RunRecord | None:
    """The newest run of a schedule (by occurrence) that finished or whose last attempt
    failed and that waits to retry, or None."""
    row = conn.execute(
        f"SELECT {RUN_COLUMNS.select} FROM job_runs WHERE schedule_id = ?"
        f" AND state IN {state_list(_OUTCOME_STATES)} ORDER BY scheduled_for DESC LIMIT 1",
        (schedule_id,),
    ).fetchone()
    return None if row is None else RUN_COLUMNS.one(row)


def attention(conn: Connection, *, tenant_id: str, now: int, limit: int) -> list[RunRecord]:
    """Runs of the last 24 h that failed or were missed, newest (by when they ended)
    first. The pick reads index entries only; just the ``limit`` rows shown are read."""
    rows = conn.execute(
        f"SELECT {RUN_COLUMNS.select} FROM job_runs WHERE rowid IN"
        f" (SELECT rowid FROM job_runs {BY_TENANT_FINISHED.on(conn)} WHERE {FINISHED_STATES_SQL}"
        f" AND tenant_id = ? AND state IN {state_list((RunState.FAILED, RunState.MISSED))}"
        f" AND {ENDED_SQL} >= ? ORDER BY {ENDED_SQL} DESC LIMIT ?) ORDER BY {ENDED_SQL} DESC",
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
