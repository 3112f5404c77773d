"""Queries on ``schedules`` (and the create-side ``request_keys``), scoped by tenant.

Rules this module guards (ADR 0033, docs/architecture.md):

- Every function takes ``tenant_id`` and never returns or changes another tenant's row: a
  foreign id behaves exactly like a missing one (:class:`NotFound`). Deleted schedules are
  soft-deleted (``deleted_at``) and invisible here.
- ``next_fire_at`` is the planner's forward-only cursor: the ``scheduled_for`` of the next
  occurrence not yet materialised. Here it is only ever *re-derived from now* — on create,
  on resume (time spent paused is not a misfire), and when a change makes already planned
  rows wrong (cron, timezone, jitter, body, content type). Then the rows of future
  occurrences planned from the old spec are withdrawn first
  (:func:`appliance.store.runs.withdraw_future_runs`); occurrences already due keep their
  runs (retries included) and are delivered with the edited target and headers.
- Every change bumps ``version`` (the API's ETag) with a compare-and-set when the caller
  gives ``expected_version``, and appends one ``schedule.*`` event in the same transaction.
- An ``Idempotency-Key`` on a create is remembered for :data:`REQUEST_KEY_TTL_MS` with a
  hash of the request: the same key and body replays the stored response; the same key with
  another body is refused (:class:`RequestKeyReused`).

Functions have the store shape ``fn(conn, *, …, now)`` and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

import apsw

from appliance.core.cron import parse_cron
from appliance.core.events import EventType
from appliance.core.ids import new_id
from appliance.core.jitter import planned_occurrences
from appliance.core.schedules import CatchupPolicy, PayloadKind, Schedule, ScheduleSpec
from appliance.errors import Conflict, NotFound
from appliance.store.events import append_event
from appliance.store.runs import (
    RunRecord,
    get_run,
    replay_run,
    trigger_run,
    withdraw_future_runs,
    withdraw_open_runs,
)

REQUEST_KEY_TTL_MS: Final = 24 * 3600 * 1000

# Changing any of these makes rows planned from the old spec wrong (their time, their
# due_at or their frozen body), so open rows are withdrawn and the cursor re-derived.
_REPLANNING_FIELDS: Final = ("cron", "timezone", "jitter_seconds", "body", "content_type")

_COLUMNS: Final = (
    "id, tenant_id, name, cron, timezone, target_url, payload_kind, body, content_type,"
    " headers, jitter_seconds, catchup_policy, catchup_window_seconds, max_attempts,"
    " timeout_seconds, paused, next_fire_at, version, created_at, updated_at"
)


class VersionMismatch(Conflict):
    """The caller's expected version (``If-Match``) is not the stored one (-> 412)."""


class RequestKeyReused(Conflict):
    """An ``Idempotency-Key`` was reused with a different request body (-> 422)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredResponse:
    """The response remembered for an ``Idempotency-Key``: status and JSON text."""

    status: int
    body: str


def first_fire_at(spec: ScheduleSpec, *, schedule_id: str, now: int) -> int | None:
    """The ``scheduled_for`` of the first planned occurrence strictly after ``now``."""
    cron = parse_cron(spec.cron, spec.timezone)
    occurrences = planned_occurrences(
        cron, schedule_id=schedule_id, jitter_seconds=spec.jitter_seconds, after_ms=now
    )
    first = next(occurrences, None)
    return first.scheduled_for if first is not None else None


def create_schedule(
    conn: apsw.Connection, *, tenant_id: str, spec: ScheduleSpec, now: int
) -> Schedule:
    schedule_id = new_id("sch", now)
    conn.execute(
        f"INSERT INTO schedules ({_COLUMNS}) VALUES"
        " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
        (
            schedule_id,
            tenant_id,
            *_spec_values(spec),
            first_fire_at(spec, schedule_id=schedule_id, now=now),
            now,
            now,
        ),
    )
    _event(conn, EventType.SCHEDULE_CREATED, tenant_id, schedule_id, version=1, now=now)
    return _require(conn, tenant_id=tenant_id, schedule_id=schedule_id)


def create_schedule_once(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    spec: ScheduleSpec,
    request_key: str,
    request_hash: str,
    render: Callable[[Schedule], StoredResponse],
    now: int,
) -> tuple[StoredResponse, bool]:
    """Create under an ``Idempotency-Key``: ``(response, created)``. A live key with the
    same ``request_hash`` returns the remembered response and creates nothing."""
    remembered = recall_request(
        conn, tenant_id=tenant_id, request_key=request_key, request_hash=request_hash, now=now
    )
    if remembered is not None:
        return remembered, False
    response = render(create_schedule(conn, tenant_id=tenant_id, spec=spec, now=now))
    conn.execute(
        "INSERT OR REPLACE INTO request_keys"
        " (tenant_id, key, request_hash, status, response, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (tenant_id, request_key, request_hash, response.status, response.body, now),
    )
    return response, True


def recall_request(
    conn: apsw.Connection, *, tenant_id: str, request_key: str, request_hash: str, now: int
) -> StoredResponse | None:
    """The response remembered for a live ``request_key``, or None. Raises
    :class:`RequestKeyReused` if the key was used with another request."""
    row = conn.execute(
        "SELECT request_hash, status, response FROM request_keys"
        " WHERE tenant_id = ? AND key = ? AND created_at > ?",
        (tenant_id, request_key, now - REQUEST_KEY_TTL_MS),
    ).fetchone()
    if row is None:
        return None
    if str(row[0]) != request_hash:
        raise RequestKeyReused(
            "this Idempotency-Key was already used with a different request body"
        )
    return StoredResponse(status=_int(row[1]), body=str(row[2]))


def prune_request_keys(conn: apsw.Connection, *, now: int) -> int:
    """Forget ``Idempotency-Key`` records past :data:`REQUEST_KEY_TTL_MS`; returns how many.
    Expired keys are already ignored, so this only bounds the table (for the pruner)."""
    conn.execute("DELETE FROM request_keys WHERE created_at <= ?", (now - REQUEST_KEY_TTL_MS,))
    return conn.changes()


def get_schedule(conn: apsw.Connection, *, tenant_id: str, schedule_id: str) -> Schedule | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM schedules WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL",
        (schedule_id, tenant_id),
    ).fetchone()
    return _schedule(row) if row is not None else None


def list_schedules(
    conn: apsw.Connection, *, tenant_id: str, limit: int, after_id: str | None = None
) -> list[Schedule]:
    """Up to ``limit`` live schedules ordered by id, after ``after_id``. Ids are ULIDs, so
    this is creation order to the millisecond (random within one)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM schedules WHERE tenant_id = ? AND deleted_at IS NULL"
        " AND id > ? ORDER BY id LIMIT ?",
        (tenant_id, after_id or "", limit),
    )
    return [_schedule(row) for row in rows]


def update_schedule(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    spec: ScheduleSpec,
    now: int,
    expected_version: int | None = None,
) -> Schedule:
    """Replace the spec. Re-plans when timing or body changed; a change of ``paused``
    has the same effect as :func:`pause_schedule` / :func:`resume_schedule`."""
    current = _require(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    _check_version(current, expected_version)
    replan = any(
        getattr(current.spec, field) != getattr(spec, field) for field in _REPLANNING_FIELDS
    )
    cursor = current.next_fire_at
    if spec.paused and not current.spec.paused:
        withdraw_open_runs(conn, schedule_id=schedule_id, now=now)
    elif replan:  # occurrences already due under the old spec are still delivered
        withdraw_future_runs(conn, schedule_id=schedule_id, now=now)
    if replan or spec.paused != current.spec.paused:
        cursor = first_fire_at(spec, schedule_id=schedule_id, now=now)
    version = _write_spec(conn, current, spec, cursor=cursor, now=now)
    _event(conn, EventType.SCHEDULE_UPDATED, tenant_id, schedule_id, version=version, now=now)
    if spec.paused != current.spec.paused:
        kind = EventType.SCHEDULE_PAUSED if spec.paused else EventType.SCHEDULE_RESUMED
        _event(conn, kind, tenant_id, schedule_id, version=version, now=now)
    return _require(conn, tenant_id=tenant_id, schedule_id=schedule_id)


def pause_schedule(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    now: int,
    expected_version: int | None = None,
) -> Schedule:
    """Stop planning; open rows not yet attempted are withdrawn. Pausing twice is a no-op."""
    return _set_paused(conn, tenant_id, schedule_id, True, now, expected_version)


def resume_schedule(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    now: int,
    expected_version: int | None = None,
) -> Schedule:
    """Plan again from the first occurrence after ``now``: nothing missed while paused is
    caught up. Runs the tenant replayed or triggered while paused stay open. Resuming a
    running schedule is a no-op."""
    return _set_paused(conn, tenant_id, schedule_id, False, now, expected_version)


def _set_paused(
    conn: apsw.Connection,
    tenant_id: str,
    schedule_id: str,
    paused: bool,
    now: int,
    expected_version: int | None,
) -> Schedule:
    current = _require(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    _check_version(current, expected_version)
    if current.spec.paused == paused:
        return current
    if paused:  # open runs of a paused schedule were replayed or triggered by its tenant:
        withdraw_open_runs(conn, schedule_id=schedule_id, now=now)  # resuming keeps them
    spec = replace(current.spec, paused=paused)
    cursor = (
        current.next_fire_at if paused else first_fire_at(spec, schedule_id=schedule_id, now=now)
    )
    version = _write_spec(conn, current, spec, cursor=cursor, now=now)
    kind = EventType.SCHEDULE_PAUSED if paused else EventType.SCHEDULE_RESUMED
    _event(conn, kind, tenant_id, schedule_id, version=version, now=now)
    return _require(conn, tenant_id=tenant_id, schedule_id=schedule_id)


def delete_schedule(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    now: int,
    expected_version: int | None = None,
) -> None:
    """Soft-delete: the row stays for its runs' history; open rows are withdrawn."""
    current = _require(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    _check_version(current, expected_version)
    withdraw_open_runs(conn, schedule_id=schedule_id, now=now)
    version = current.version + 1
    _compare_and_set(
        conn,
        "UPDATE schedules SET deleted_at = ?, updated_at = ?, version = ?"
        " WHERE id = ? AND version = ? AND deleted_at IS NULL",
        (now, now, version, schedule_id, current.version),
    )
    _event(conn, EventType.SCHEDULE_DELETED, tenant_id, schedule_id, version=version, now=now)


def trigger_schedule(
    conn: apsw.Connection, *, tenant_id: str, schedule_id: str, now: int
) -> tuple[RunRecord, bool]:
    """A manual occurrence of a live schedule at ``now`` (whole second): ``(run, created)``.
    Two triggers within one second are the same occurrence, so the second finds the first."""
    schedule = _require(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    return trigger_run(conn, schedule=schedule, now=now)


def replay_schedule_run(
    conn: apsw.Connection, *, tenant_id: str, run_id: str, now: int
) -> RunRecord:
    """Replay a finished run (:func:`appliance.store.runs.replay_run`) unless its schedule
    was deleted: a deleted schedule never fires again, not even an old occurrence."""
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    if get_schedule(conn, tenant_id=tenant_id, schedule_id=run.schedule_id) is None:
        raise Conflict(f"run {run_id} belongs to a deleted schedule; it cannot be replayed")
    return replay_run(conn, tenant_id=tenant_id, run_id=run_id, now=now)


def _require(conn: apsw.Connection, *, tenant_id: str, schedule_id: str) -> Schedule:
    schedule = get_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    if schedule is None:
        raise NotFound(f"no schedule {schedule_id}")
    return schedule


def _check_version(current: Schedule, expected: int | None) -> None:
    if expected is not None and expected != current.version:
        raise VersionMismatch(
            f"schedule {current.id} is at version {current.version}, not {expected}"
        )


def _write_spec(
    conn: apsw.Connection, current: Schedule, spec: ScheduleSpec, *, cursor: int | None, now: int
) -> int:
    """Store ``spec`` and ``cursor`` over ``current`` (compare-and-set); the new version."""
    version = current.version + 1
    _compare_and_set(
        conn,
        "UPDATE schedules SET name = ?, cron = ?, timezone = ?, target_url = ?,"
        " payload_kind = ?, body = ?, content_type = ?, headers = ?, jitter_seconds = ?,"
        " catchup_policy = ?, catchup_window_seconds = ?, max_attempts = ?,"
        " timeout_seconds = ?, paused = ?, next_fire_at = ?, version = ?, updated_at = ?"
        " WHERE id = ? AND version = ? AND deleted_at IS NULL",
        (*_spec_values(spec), cursor, version, now, current.id, current.version),
    )
    return version


def _compare_and_set(conn: apsw.Connection, sql: str, params: tuple[object, ...]) -> None:
    conn.execute(sql, params)
    if conn.changes() != 1:
        # Writes are serialised and the row was read in this transaction: unreachable
        # unless another writer bypassed BEGIN IMMEDIATE. Refuse rather than guess.
        raise Conflict("the schedule changed during the update; retry")


def _spec_values(spec: ScheduleSpec) -> tuple[object, ...]:
    return (
        spec.name,
        spec.cron,
        spec.timezone,
        spec.target_url,
        spec.payload_kind.value,
        spec.body,
        spec.content_type,
        json.dumps([list(pair) for pair in spec.headers], separators=(",", ":")),
        spec.jitter_seconds,
        spec.catchup_policy.value,
        spec.catchup_window_seconds,
        spec.max_attempts,
        spec.timeout_seconds,
        int(spec.paused),
    )


def _schedule(row: tuple[apsw.SQLiteValue, ...]) -> Schedule:
    next_fire_at = row[16]
    return Schedule(
        id=str(row[0]),
        tenant_id=str(row[1]),
        spec=_spec(row[2:16]),
        version=_int(row[17]),
        next_fire_at=None if next_fire_at is None else _int(next_fire_at),
        created_at=_int(row[18]),
        updated_at=_int(row[19]),
    )


def _spec(row: tuple[apsw.SQLiteValue, ...]) -> ScheduleSpec:
    name, cron, timezone, url, kind, body, content_type, headers = row[:8]
    return ScheduleSpec(
        name=str(name),
        cron=str(cron),
        timezone=str(timezone),
        target_url=str(url),
        payload_kind=PayloadKind(str(kind)),
        body=_bytes(body),
        content_type=str(content_type),
        headers=_headers(str(headers)),
        jitter_seconds=_int(row[8]),
        catchup_policy=CatchupPolicy(str(row[9])),
        catchup_window_seconds=_int(row[10]),
        max_attempts=_int(row[11]),
        timeout_seconds=_int(row[12]),
        paused=bool(row[13]),
    )


def _headers(text: str) -> tuple[tuple[str, str], ...]:
    if text == "[]":  # most schedules: no parsing (a list page reads 51 rows)
        return ()
    return tuple((str(n), str(v)) for n, v in json.loads(text))


def _int(value: apsw.SQLiteValue) -> int:
    if not isinstance(value, int):
        raise TypeError(f"expected an INTEGER column, got {value!r}")
    return value


def _bytes(value: apsw.SQLiteValue) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"expected a BLOB column, got {type(value).__name__}")
    return value


def _event(
    conn: apsw.Connection,
    kind: EventType,
    tenant_id: str,
    schedule_id: str,
    *,
    version: int,
    now: int,
) -> None:
    append_event(
        conn,
        tenant_id=tenant_id,
        type=kind,
        now=now,
        schedule_id=schedule_id,
        data={"version": version},
    )
