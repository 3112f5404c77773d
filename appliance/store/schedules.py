"""Queries on ``schedules``, scoped by tenant: create, read, list, edit, delete.

Rules this module guards (ADR 0033, docs/architecture.md):

- Every function takes ``tenant_id`` and never returns or changes another tenant's row: a
  foreign id behaves exactly like a missing one (:class:`NotFound`). Deleted schedules are
  soft-deleted (``deleted_at``) and invisible here.
- A tenant holds at most ``max_schedules`` live schedules: a create past it is refused
  (:class:`ScheduleLimitReached`), so one tenant cannot grow the planner's work without
  bound (docs/configuration.md, ``max_schedules_per_tenant``).
- Creating is :func:`create_schedules`, all or none (a batch counts whole against the
  limit; an item whose timing never fires refuses it, naming the item's ``index``); a
  single create is a batch of one, so both write the same rows and events.
- ``next_fire_at`` is the planner's forward-only cursor: the ``scheduled_for`` of the next
  occurrence not yet materialised. Before an edit or delete, occurrences already due that
  the planner has not reached yet (it lags after a forward clock step) are planned under
  the current spec (:func:`settled`), so none is left without a row. Then the cursor is
  only ever *re-derived from now* — on create,
  on resume (time spent paused is not a misfire), and when a change makes already planned
  rows wrong (cron, timezone, jitter, body, content type). Then the rows of future
  occurrences planned from the old spec are withdrawn first
  (:func:`appliance.store.runs.withdraw_future_runs`); occurrences already due keep their
  runs (retries included) and are delivered with the edited target and headers.
- A schedule's ``key`` is unique among the tenant's live schedules
  (:mod:`appliance.store.schedule_keys`): a create or edit taking a held key is refused.
- Every change bumps ``version`` (the API's ETag) with a compare-and-set when the caller
  gives ``expected_version`` (:func:`check_version`), and appends one ``schedule.*``
  event in the same transaction.

Pausing and resuming are :mod:`appliance.store.pauses`; the ``Idempotency-Key`` cache of
creates is :mod:`appliance.store.request_keys`. Functions have the store shape
``fn(conn, *, …, now)`` and never commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from appliance.core.cursor import anchored, first_fire_at, first_fire_or_refuse
from appliance.core.events import Actor, EventType, JsonValue
from appliance.core.ids import new_ids
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.schedule_input import changed_fields
from appliance.core.schedules import Schedule, ScheduleSpec
from appliance.errors import Conflict, FieldError, NotFound, ValidationError
from appliance.store.events import append_event, append_schedule_events
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection
from appliance.store.runs import withdraw_future_runs, withdraw_open_runs
from appliance.store.schedule_keys import check_keys_free
from appliance.store.schedule_rows import COLUMNS, SPEC_FIELDS, spec_values
from appliance.store.usecases.plan_pass import settle_schedule

# Changing any of these makes rows planned from the old spec wrong (their time, their
# due_at or their frozen body), so open rows are withdrawn and the cursor re-derived.
_REPLANNING_FIELDS: Final = (
    "cron",
    "timezone",
    "jitter_seconds",
    "body",
    "content_type",
    "at",
    "every_seconds",
    "start_at",
    "end_at",
    "templated",
    "dst_gap",
    "dst_fold",
)


class VersionMismatch(Conflict):
    """The caller's expected version (``If-Match``) is not the stored one (-> 412)."""


class ScheduleLimitReached(Conflict):
    """The tenant already holds its maximum number of live schedules (or would, past it,
    with the ``adding`` of a batch)."""

    def __init__(self, limit: int, *, held: int | None = None, adding: int = 1) -> None:
        setting = f"max_schedules_per_tenant = {limit}"
        if adding == 1:
            text = f"this tenant already has {limit} schedules, the most it may have ({setting})"
            super().__init__(f"{text}; delete one to create another")
        else:
            room = max(limit - (held or 0), 0)
            super().__init__(
                f"this tenant has {held} schedules and may have at most {limit} ({setting}):"
                f" the {adding} of this batch do not fit; send at most {room} or delete some"
            )
        self.limit = limit


def count_schedules(conn: Connection, *, tenant_id: str) -> int:
    """How many live schedules the tenant has (served by ``schedules_tenant``)."""
    row = conn.execute(
        "SELECT COUNT(*) FROM schedules WHERE tenant_id = ? AND deleted_at IS NULL", (tenant_id,)
    ).fetchone()
    return rows.integer(row[0]) if row else 0


def create_schedule(
    conn: Connection,
    *,
    tenant_id: str,
    spec: ScheduleSpec,
    now: int,
    max_schedules: int | None = None,
    actor: Actor | None = None,
) -> Schedule:
    """Create a schedule: :func:`create_schedules` of one."""
    try:
        (schedule,) = create_schedules(
            conn, tenant_id=tenant_id, specs=[spec], now=now, max_schedules=max_schedules,
            actor=actor,
        )  # fmt: skip
    except ValidationError as error:  # one schedule: its fields, not an item's
        raise ValidationError([replace(e, index=None) for e in error.errors]) from None
    return schedule


def create_schedules(
    conn: Connection,
    *,
    tenant_id: str,
    specs: Sequence[ScheduleSpec],
    now: int,
    max_schedules: int | None = None,
    actor: Actor | None = None,
) -> list[Schedule]:
    """Create schedules, all or none, in the order given (their ids ascend in it):
    :class:`ScheduleLimitReached` if the tenant would hold more than ``max_schedules``
    live ones (None: no limit, for operator tools); ValidationError, each error with its
    item's ``index``, for timings that would never fire. One ``executemany`` writes the
    rows and one their ``schedule.created`` events, naming ``actor`` (who asked)."""
    if max_schedules is not None:
        held = count_schedules(conn, tenant_id=tenant_id)
        if held + len(specs) > max_schedules:
            raise ScheduleLimitReached(max_schedules, held=held, adding=len(specs))
    check_keys_free(
        conn, tenant_id=tenant_id, keys=[spec.key for spec in specs], batch=len(specs) > 1
    )
    ids = sorted(new_ids("sch", now, len(specs)))
    # A batch's own cache: its specs share a few timings. Not for one spec: the cache
    # computes a chunk of occurrences where one croniter step answers.
    shared = OccurrenceCache() if len(specs) > 1 else None
    created: list[Schedule] = []
    errors: list[FieldError] = []
    for index, (schedule_id, spec) in enumerate(zip(ids, specs, strict=True)):
        spec = anchored(spec, now=now)
        try:
            cursor = first_fire_or_refuse(spec, schedule_id=schedule_id, now=now, shared=shared)
        except ValidationError as error:
            errors.extend(replace(e, index=index) for e in error.errors)
            continue
        created.append(
            Schedule(
                id=schedule_id,
                tenant_id=tenant_id,
                spec=spec,
                version=1,
                next_fire_at=cursor,
                created_at=now,
                updated_at=now,
            )
        )
    if errors:
        raise ValidationError(errors)
    conn.executemany(
        f"INSERT INTO schedules ({', '.join(COLUMNS.fields)})"
        f" VALUES ({', '.join('?' * len(COLUMNS.fields))})",
        [(s.id, tenant_id, *spec_values(s.spec), s.next_fire_at, 1, now, now) for s in created],
    )
    append_schedule_events(
        conn, tenant_id=tenant_id, type=EventType.SCHEDULE_CREATED, now=now, schedule_ids=ids,
        data=_event_data(1), actor=actor,
    )  # fmt: skip
    return created  # what a read of them answers (tests/store/test_create_schedules.py)


def get_schedule(conn: Connection, *, tenant_id: str, schedule_id: str) -> Schedule | None:
    row = conn.execute(
        f"SELECT {COLUMNS.select} FROM schedules"
        " WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL",
        (schedule_id, tenant_id),
    ).fetchone()
    return None if row is None else COLUMNS.one(row)


def require_schedule(conn: Connection, *, tenant_id: str, schedule_id: str) -> Schedule:
    """The live schedule, or :class:`NotFound`."""
    schedule = get_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    if schedule is None:
        raise NotFound(f"no schedule {schedule_id}")
    return schedule


def list_schedules(
    conn: Connection,
    *,
    tenant_id: str,
    limit: int,
    after_id: str | None = None,
    key: str | None = None,
) -> list[Schedule]:
    """Up to ``limit`` live schedules ordered by id, after ``after_id``; only the one whose
    ``key`` is ``key`` when given. Ids are ULIDs, so this is creation order to the
    millisecond (random within one)."""
    by_key = "" if key is None else " AND key = ?"
    return COLUMNS.all(
        conn.execute(
            f"SELECT {COLUMNS.select} FROM schedules WHERE tenant_id = ? AND deleted_at IS NULL"
            f"{by_key} AND id > ? ORDER BY id LIMIT ?",
            (tenant_id, *(() if key is None else (key,)), after_id or "", limit),
        )
    )


def update_schedule(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    spec: ScheduleSpec,
    now: int,
    expected_version: int | None = None,
    actor: Actor | None = None,
) -> Schedule:
    """Replace the spec. Re-plans when timing or body changed; a change of ``paused``
    has the same effect as pausing or resuming (:mod:`appliance.store.pauses`)."""
    current = settled(conn, tenant_id, schedule_id, now=now, expected_version=expected_version)
    if spec.key != current.spec.key:
        check_keys_free(conn, tenant_id=tenant_id, keys=[spec.key], schedule_id=schedule_id)
    spec = anchored(spec, now=now)
    replan = any(
        getattr(current.spec, field) != getattr(spec, field) for field in _REPLANNING_FIELDS
    )
    cursor = current.next_fire_at
    if spec.paused and not current.spec.paused:
        withdraw_open_runs(conn, schedule_id=schedule_id, now=now)
    elif replan:  # occurrences already due under the old spec are still delivered
        withdraw_future_runs(conn, schedule_id=schedule_id, now=now)
    if replan:
        cursor = first_fire_or_refuse(spec, schedule_id=schedule_id, now=now)
    elif spec.paused != current.spec.paused:
        cursor = first_fire_at(spec, schedule_id=schedule_id, now=now)
    version = write_spec(conn, current, spec, cursor=cursor, now=now)
    changed = changed_fields(current.spec, spec)
    event(
        conn,
        EventType.SCHEDULE_UPDATED,
        tenant_id,
        schedule_id,
        version=version,
        now=now,
        actor=actor,
        changed=changed,
    )
    if spec.paused != current.spec.paused:
        kind = EventType.SCHEDULE_PAUSED if spec.paused else EventType.SCHEDULE_RESUMED
        event(conn, kind, tenant_id, schedule_id, version=version, now=now, actor=actor)
    return require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)


def delete_schedule(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    now: int,
    expected_version: int | None = None,
    actor: Actor | None = None,
) -> None:
    """Soft-delete: the row stays for its runs' history; open rows are withdrawn."""
    current = settled(conn, tenant_id, schedule_id, now=now, expected_version=expected_version)
    withdraw_open_runs(conn, schedule_id=schedule_id, now=now)
    version = current.version + 1
    _compare_and_set(
        conn,
        "UPDATE schedules SET deleted_at = ?, updated_at = ?, version = ?"
        " WHERE id = ? AND version = ? AND deleted_at IS NULL",
        (now, now, version, schedule_id, current.version),
    )
    event(
        conn,
        EventType.SCHEDULE_DELETED,
        tenant_id,
        schedule_id,
        version=version,
        now=now,
        actor=actor,
    )


def settled(
    conn: Connection,
    tenant_id: str,
    schedule_id: str,
    *,
    now: int,
    expected_version: int | None,
) -> Schedule:
    """The tenant's schedule at ``expected_version``, once every occurrence already due
    under its current spec has a row (:func:`appliance.store.usecases.plan_pass.settle_schedule`):
    an edit, pause or delete then changes only what is planned from now on."""
    current = require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    check_version(current, expected_version)
    if settle_schedule(conn, schedule_id=schedule_id, now=now):
        current = require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    return current


def check_version(current: Schedule, expected: int | None) -> None:
    """:class:`VersionMismatch` unless ``expected`` is None or ``current``'s version."""
    if expected is not None and expected != current.version:
        raise VersionMismatch(
            f"schedule {current.id} is at version {current.version}, not {expected}"
        )


def write_spec(
    conn: Connection, current: Schedule, spec: ScheduleSpec, *, cursor: int | None, now: int
) -> int:
    """Store ``spec`` and ``cursor`` over ``current`` (compare-and-set); the new version."""
    version = current.version + 1
    assignments = ", ".join(f"{name} = ?" for name in SPEC_FIELDS)
    _compare_and_set(
        conn,
        f"UPDATE schedules SET {assignments}, next_fire_at = ?, version = ?, updated_at = ?"
        " WHERE id = ? AND version = ? AND deleted_at IS NULL",
        (*spec_values(spec), cursor, version, now, current.id, current.version),
    )
    return version


def _compare_and_set(conn: Connection, sql: str, params: tuple[object, ...]) -> None:
    conn.execute(sql, params)
    if conn.changes() != 1:
        # Writes are serialised and the row was read in this transaction: unreachable
        # unless another writer bypassed BEGIN IMMEDIATE. Refuse rather than guess.
        raise Conflict("the schedule changed during the update; retry")


def event(
    conn: Connection,
    kind: EventType,
    tenant_id: str,
    schedule_id: str,
    *,
    version: int,
    now: int,
    actor: Actor | None = None,
    changed: list[str] | None = None,
    note: str | None = None,
) -> None:
    """A ``schedule.*`` event carrying the schedule's new version, who asked, (for
    ``schedule.updated``) the names of the fields that changed and (for
    ``schedule.paused``) the note given with the pause."""
    data = _event_data(version, changed=changed, note=note)
    append_event(
        conn,
        tenant_id=tenant_id,
        type=kind,
        now=now,
        schedule_id=schedule_id,
        data=data,
        actor=actor,
    )


def _event_data(
    version: int, *, changed: list[str] | None = None, note: str | None = None
) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = {"version": version}
    if changed is not None:
        data["changed"] = changed
    if note is not None:
        data["note"] = note
    return data
