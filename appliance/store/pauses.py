"""Pausing and resuming schedules: by the tenant, and by a receiver answering 410 Gone.

Rules this module guards (ADR 0032 "Outcomes", ADR 0033):

- A pause first gives every occurrence already due a row, as the planner would
  (:func:`appliance.store.schedules.settled`), then stops planning and withdraws the
  schedule's open runs
  (:func:`appliance.store.runs.withdraw_open_runs`); running rows finish their attempt
  and are cancelled instead of retried. Pausing twice is a no-op.
- A resume plans again from the first occurrence after now: nothing missed while paused
  is caught up. Runs the tenant replayed or triggered while paused stay open.
- Every pause bumps ``version`` and appends its event in the same transaction:
  ``schedule.paused`` for the tenant's, ``schedule.paused_by_receiver`` for a 410's.
- A tenant's pause may carry a note (why; trimmed, at most ``MAX_NOTE_CHARS``, blank is
  none), kept in its ``schedule.paused`` event and shown while the schedule stays paused.
  The API's JSON body and the UI's form are read by the same :func:`parse_note`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Final

from appliance.core.cursor import first_fire_at
from appliance.core.events import Actor, EventType
from appliance.core.schedules import Schedule
from appliance.errors import ValidationError
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.runs import withdraw_open_runs
from appliance.store.schedules import event, require_schedule, settled, write_spec
from appliance.store.usecases.plan_pass import settle_schedule

MAX_NOTE_CHARS: Final = 500
# The events that start or end a pause, newest first: the note of the pause in force.
_PAUSE_TURNS: Final = (
    EventType.SCHEDULE_PAUSED,
    EventType.SCHEDULE_RESUMED,
    EventType.SCHEDULE_PAUSED_BY_RECEIVER,
)


def parse_note(value: object) -> str | None:
    """A pause's ``note`` as given (None: no note); trimmed, blank is none.
    ValidationError naming ``note`` when it is not text or longer than MAX_NOTE_CHARS."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError.single("note", "must be text (why the schedule is paused)")
    note = value.strip()
    if len(note) > MAX_NOTE_CHARS:
        raise ValidationError.single("note", f"is {len(note)} characters; at most {MAX_NOTE_CHARS}")
    return note or None


def parse_pause(obj: object) -> str | None:
    """The note of a pause's JSON body (``{}``, ``null`` or ``{"note": …}``)."""
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise ValidationError.single("body", 'must be a JSON object, e.g. {"note": "why"}')
    unknown = sorted(set(obj) - {"note"})
    if unknown:
        raise ValidationError.single(str(unknown[0]), "is not a field of a pause; drop it")
    return parse_note(obj.get("note"))


def pause_schedule(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    now: int,
    expected_version: int | None = None,
    actor: Actor | None = None,
    note: str | None = None,
) -> Schedule:
    """Stop planning; open rows not yet attempted are withdrawn. Pausing twice is a no-op
    (the first pause's note stays). ``note`` is one :func:`parse_note` answered."""
    return _set_paused(conn, tenant_id, schedule_id, True, now, expected_version, actor, note)


def resume_schedule(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    now: int,
    expected_version: int | None = None,
    actor: Actor | None = None,
) -> Schedule:
    """Plan again from the first occurrence after ``now``. Resuming a running schedule is
    a no-op."""
    return _set_paused(conn, tenant_id, schedule_id, False, now, expected_version, actor)


def _set_paused(
    conn: Connection,
    tenant_id: str,
    schedule_id: str,
    paused: bool,
    now: int,
    expected_version: int | None,
    actor: Actor | None,
    note: str | None = None,
) -> Schedule:
    current = settled(conn, tenant_id, schedule_id, now=now, expected_version=expected_version)
    if current.spec.paused == paused:
        return current
    if paused:  # open runs of a paused schedule were replayed or triggered by its tenant:
        withdraw_open_runs(conn, schedule_id=schedule_id, now=now)  # resuming keeps them
    spec = replace(current.spec, paused=paused)
    cursor = (
        current.next_fire_at if paused else first_fire_at(spec, schedule_id=schedule_id, now=now)
    )
    version = write_spec(conn, current, spec, cursor=cursor, now=now)
    kind = EventType.SCHEDULE_PAUSED if paused else EventType.SCHEDULE_RESUMED
    event(conn, kind, tenant_id, schedule_id, version=version, now=now, actor=actor, note=note)
    return require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)


def pause_by_receiver(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    run_id: str,
    status: int | None,
    now: int,
) -> bool:
    """The receiver answered 410 Gone to ``run_id``: pause the schedule (version + 1),
    withdraw its open runs and record ``schedule.paused_by_receiver``. False if it was
    already paused or deleted."""
    settle_schedule(conn, schedule_id=schedule_id, now=now)
    conn.execute(
        "UPDATE schedules SET paused = 1, version = version + 1, updated_at = ?"
        " WHERE id = ? AND paused = 0 AND deleted_at IS NULL",
        (now, schedule_id),
    )
    if conn.changes() != 1:
        return False
    withdraw_open_runs(conn, schedule_id=schedule_id, now=now)
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.SCHEDULE_PAUSED_BY_RECEIVER,
        now=now,
        schedule_id=schedule_id,
        run_id=run_id,
        data={"run_id": run_id, "status": status},
    )
    return True


def pause_note(conn: Connection, *, tenant_id: str, schedule_id: str) -> str | None:
    """The note of the tenant's pause in force on ``schedule_id`` (None: not paused by
    its tenant, or paused without a note). Reads back from the newest pause or resume."""
    row = conn.execute(
        "SELECT type, data FROM events WHERE schedule_id = ? AND tenant_id = ?"
        f" AND type IN ({','.join('?' * len(_PAUSE_TURNS))}) ORDER BY seq DESC LIMIT 1",
        (schedule_id, tenant_id, *(str(t) for t in _PAUSE_TURNS)),
    ).fetchone()
    if row is None or row[0] != EventType.SCHEDULE_PAUSED:
        return None
    note = json.loads(str(row[1])).get("note")
    return note if isinstance(note, str) else None
