"""The planner's queries on ``schedules``: which cursors are due, and moving them forward.

Rules this module guards (ADR 0033 "Planning"):

- The cursor ``next_fire_at`` is the ``scheduled_for`` of the schedule's next occurrence
  that has not been materialised yet. ``NULL`` means it never fires again.
- The cursor only moves forward, by compare-and-set on the value the planner read:
  :func:`advance_cursor` refuses to move it backwards or from a value it no longer has.
  Together with the unique index on ``job_runs`` this makes a backwards clock jump or a
  racing planner a no-op.
- Paused and deleted schedules are never planned (resuming moves the cursor to now, so
  paused time is not a misfire).
"""

from __future__ import annotations

from typing import Any

import apsw

from appliance.core.schedules import CatchupPolicy, PayloadKind, Schedule, ScheduleSpec
from appliance.errors import StoreError
from appliance.store.runs import headers_from_json

_COLUMNS = (
    "id, tenant_id, name, cron, timezone, target_url, payload_kind, body, content_type,"
    " headers, jitter_seconds, catchup_policy, catchup_window_seconds, max_attempts,"
    " timeout_seconds, paused, next_fire_at, version, created_at, updated_at"
)
# Literal conditions matching the ``schedules_due`` partial index.
PLANNABLE_SQL = "paused = 0 AND deleted_at IS NULL AND next_fire_at IS NOT NULL"


def _schedule(row: tuple[Any, ...]) -> Schedule:
    (sid, tenant, name, cron, tz, url, kind, body, ctype, headers, jitter, policy, window,
     max_attempts, timeout, paused, cursor, version, created, updated) = row  # fmt: skip
    spec = ScheduleSpec(
        name=name,
        cron=cron,
        timezone=tz,
        target_url=url,
        payload_kind=PayloadKind(kind),
        body=bytes(body),
        content_type=ctype,
        headers=headers_from_json(headers),
        jitter_seconds=jitter,
        catchup_policy=CatchupPolicy(policy),
        catchup_window_seconds=window,
        max_attempts=max_attempts,
        timeout_seconds=timeout,
        paused=bool(paused),
    )
    return Schedule(
        id=sid,
        tenant_id=tenant,
        spec=spec,
        version=version,
        next_fire_at=cursor,
        created_at=created,
        updated_at=updated,
    )


def due_schedules(conn: apsw.Connection, *, horizon: int, limit: int) -> list[Schedule]:
    """Unpaused, undeleted schedules whose cursor is at or before ``horizon`` (epoch ms),
    earliest cursor first, at most ``limit``."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM schedules WHERE {PLANNABLE_SQL} AND next_fire_at <= ?"
        " ORDER BY next_fire_at LIMIT ?",
        (horizon, limit),
    )
    return [_schedule(row) for row in rows]


def advance_cursor(
    conn: apsw.Connection, *, schedule_id: str, expected: int, new: int | None
) -> None:
    """Move a cursor from ``expected`` to ``new`` (None: never fires again).

    Raises StoreError if ``new`` is not after ``expected`` or the cursor no longer reads
    ``expected`` — either would mean an occurrence planned twice or skipped."""
    if new is not None and new <= expected:
        raise StoreError(f"schedule {schedule_id}: cursor may not move from {expected} to {new}")
    conn.execute(
        "UPDATE schedules SET next_fire_at = ? WHERE id = ? AND next_fire_at = ?",
        (new, schedule_id, expected),
    )
    if conn.changes() != 1:
        raise StoreError(f"schedule {schedule_id}: cursor moved under the planner")


def earliest_cursor(conn: apsw.Connection) -> int | None:
    """The earliest cursor of any plannable schedule (served by ``schedules_due``)."""
    row = conn.execute(f"SELECT MIN(next_fire_at) FROM schedules WHERE {PLANNABLE_SQL}").fetchone()
    return None if row is None or row[0] is None else int(row[0])
