"""The planner's queries on ``schedules``: which cursors are due, and moving them forward.

Rules this module guards (ADR 0033 "Planning"):

- The cursor ``next_fire_at`` is the ``scheduled_for`` of the schedule's next occurrence
  that has not been materialised yet. ``NULL`` means it never fires again.
- The cursor only moves forward, by compare-and-set on the value the planner read:
  :func:`advance_cursors` refuses to move it backwards or from a value it no longer has.
  Together with the unique index on ``job_runs`` this makes a backwards clock jump or a
  racing planner a no-op.
- Paused and deleted schedules are never planned (resuming moves the cursor to now, so
  paused time is not a misfire), nor are a suspended tenant's (its cursors stay put:
  resuming the tenant catches up per policy, :mod:`appliance.store.suspension`).
- A pass works in batches: :func:`appliance.store.materialise.insert_runs` inserts all
  its rows with one prepared statement (each row still ``ON CONFLICT DO NOTHING``, and
  only the rows actually inserted come back), and
  :func:`advance_cursors` moves all its cursors, each by the same compare-and-set,
  refusing the whole batch if any one cursor no longer reads what the planner read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from appliance.core.schedules import CatchupPolicy
from appliance.errors import StoreError
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection
from appliance.store.suspension import SUSPENDED_TENANTS_SQL

# Literal conditions matching the ``schedules_due`` partial index.
PLANNABLE_SQL = "paused = 0 AND deleted_at IS NULL AND next_fire_at IS NOT NULL"
# ... and not a suspended tenant's (the subquery runs once per statement: few rows).
PLAN_SQL = f"{PLANNABLE_SQL} AND tenant_id NOT IN ({SUSPENDED_TENANTS_SQL})"


class DueSchedule(NamedTuple):
    """The columns planning one schedule needs, and no more (URL, headers and name are the
    dispatcher's business). A named tuple rather than a dataclass: one is built per
    schedule per pass, and the frozen dataclass cost several times more than the tuple."""

    id: str
    tenant_id: str
    version: int
    cron: str
    timezone: str
    content_type: str
    body: bytes
    jitter_seconds: int
    catchup_policy: CatchupPolicy
    catchup_window_seconds: int
    cursor: int  # next_fire_at: set, or the schedule would not be due
    # Timing besides cron (core.timing): None for a plain cron schedule.
    at: int | None
    every_seconds: int | None
    start_at: int | None
    end_at: int | None
    overlap: str  # an Overlap value, left as text: read once per schedule per pass
    templated: int  # 1: ``body`` is a payload template, rendered per run
    dst_gap: str | None  # the DST policy (core.dst); None: ADR 0037's rule
    dst_fold: str | None


_DUE_COLUMNS = rows.Columns(
    DueSchedule,
    DueSchedule._fields,
    sql={"cursor": "next_fire_at"},
    convert={"catchup_policy": rows.enum_of(CatchupPolicy)},
)


def due_cursors(conn: Connection, *, horizon: int, limit: int) -> list[DueSchedule]:
    """Unpaused, undeleted schedules of active tenants whose cursor is at or before
    ``horizon`` (epoch ms), earliest cursor first, at most ``limit`` — only the columns
    planning needs."""
    return _DUE_COLUMNS.all(
        conn.execute(
            f"SELECT {_DUE_COLUMNS.select} FROM schedules WHERE {PLAN_SQL}"
            " AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?",
            (horizon, limit),
        )
    )


def due_cursor(conn: Connection, *, schedule_id: str, horizon: int) -> DueSchedule | None:
    """One schedule, as :func:`due_cursors` reads it, if it is plannable and its cursor is
    at or before ``horizon``; else None."""
    row = conn.execute(
        f"SELECT {_DUE_COLUMNS.select} FROM schedules WHERE id = ? AND {PLANNABLE_SQL}"
        " AND next_fire_at <= ?",
        (schedule_id, horizon),
    ).fetchone()
    return None if row is None else _DUE_COLUMNS.one(row)


class CursorMove(NamedTuple):
    schedule_id: str
    expected: int  # the cursor the planner read
    new: int | None  # None: never fires again


_ADVANCE = "UPDATE schedules SET next_fire_at = ? WHERE id = ? AND next_fire_at = ?"


def advance_cursors(conn: Connection, moves: Sequence[CursorMove]) -> None:
    """Move each cursor from ``expected`` to ``new`` (None: never fires again), with one
    prepared statement. Raises StoreError — the caller's transaction rolls back — if any
    ``new`` is not after its ``expected`` or any cursor no longer reads ``expected``:
    either would mean an occurrence planned twice or skipped."""
    for move in moves:
        if move.new is not None and move.new <= move.expected:
            raise StoreError(
                f"schedule {move.schedule_id}: cursor may not move from {move.expected}"
                f" to {move.new}"
            )
    if not moves:
        return
    # The change count says whether every move applied (schedules has no triggers); only
    # when one did not are the moves done again with RETURNING, to name it (RETURNING
    # costs about a third of the statement: bench/HISTORY.md, "Planner, round two").
    conn.execute("SAVEPOINT advance_cursors")
    before = conn.total_changes()
    ordered = [(move.new, move.schedule_id, move.expected) for move in moves]  # no ?N in PostgreSQL
    conn.executemany(_ADVANCE, ordered)
    if conn.total_changes() - before == len(moves):
        conn.execute("RELEASE advance_cursors")
        return
    conn.execute("ROLLBACK TO advance_cursors")
    moved = [sid for (sid,) in conn.executemany(_ADVANCE + " RETURNING id", ordered)]
    conn.execute("RELEASE advance_cursors")
    if len(moved) != len(moves):
        # Name the first move refused (for a schedule listed twice, its second move).
        remaining = Counter(moved)
        for move in moves:
            if not remaining[move.schedule_id]:
                raise StoreError(f"schedule {move.schedule_id}: cursor moved under the planner")
            remaining[move.schedule_id] -= 1


def earliest_cursor(conn: Connection) -> int | None:
    """The earliest cursor of any plannable schedule (served by ``schedules_due``)."""
    row = conn.execute(f"SELECT MIN(next_fire_at) FROM schedules WHERE {PLAN_SQL}").fetchone()
    return None if row is None or row[0] is None else int(row[0])
