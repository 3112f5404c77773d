"""A resend with a new key: a copy of a run, delivered under a fresh idempotency key
(docs/receiver.md, "Resend, curl and the dedupe test"). A resend with the same key is a
replay (:func:`appliance.store.usecases.manual.replay_run`), not this module's.

Rules this module guards:

- **The copy is its own run**, a manual occurrence of the schedule like a trigger's, so
  every rule of runs holds for it unchanged: one row per second of the schedule under the
  unique index, its id and key derived from its canonical ``scheduled_for`` (ADR 0037),
  so ``X-Idempotency-Key`` is fresh and still the hash of ``X-Scheduled-For``. It names
  the run it copies (``resend_of``: the ``X-Steeple-Resend`` header of its every attempt)
  and sends that run's body bytes, fixed when the original was materialised.
- **It never takes an occurrence's place.** Its second is the latest one before the
  resend's own second that has no row of the schedule and is not an occurrence of the
  schedule's timing, within :data:`SLOT_WINDOW_MS`: a past second the planner will never
  plan, and one no trigger can claim any more (a trigger takes the current second). A
  schedule that fired at every second of that window answers Conflict.
- **A double-click is one copy**: a second resend of the same run within the same second
  returns the copy already made (``created`` False).
- Due now, with a fresh attempt budget and retry window from now; a ``schedule.run.resent``
  event (the copy's run id, the original's id and key) commits with the row. The original
  is not touched, whatever its state. A run of a deleted schedule is never sent again.
"""

from __future__ import annotations

import itertools
from typing import Final

from appliance.core.events import Actor, EventType
from appliance.core.instants import format_scheduled_for
from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.core.schedules import Schedule
from appliance.core.timing import occurrences
from appliance.errors import Conflict, StoreError
from appliance.store.events import append_event
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection
from appliance.store.materialise import insert_runs
from appliance.store.reproduce import run_and_schedule
from appliance.store.runs import RunRecord, must_get_run

SLOT_WINDOW_MS: Final = 3_600_000  # how far back a copy's second is looked for


def resend_copy(
    conn: Connection, *, tenant_id: str, run_id: str, now: int, actor: Actor | None = None
) -> tuple[RunRecord, bool]:
    """A copy of the tenant's run ``run_id``, pending and due now: ``(copy, created)``.
    NotFound; Conflict for a run of a deleted schedule or when no second is free."""
    original, schedule = run_and_schedule(
        conn, tenant_id=tenant_id, run_id=run_id, gone="it cannot be resent"
    )
    second = now - now % 1000
    made = conn.execute(
        "SELECT id FROM job_runs WHERE resend_of = ? AND created_at >= ? AND created_at < ?",
        (run_id, second, second + 1000),
    ).fetchone()
    if made is not None:
        return must_get_run(conn, tenant_id=tenant_id, run_id=made[0]), False
    slot = _free_second(conn, schedule, before=second)
    digest = _body_digest(conn, run_id)
    copy = occurrence_run(
        schedule_id=schedule.id,
        tenant_id=tenant_id,
        schedule_version=schedule.version,
        scheduled_for=slot,
        due_at=now,
        state=RunState.PENDING,
        trigger=Trigger.MANUAL,
        body_digest=digest,
    )
    if insert_runs(conn, [copy], now=now) != {copy.id}:
        raise StoreError(f"the copy of run {run_id} met a row at a second found free")
    conn.execute(
        "UPDATE job_runs SET resend_of = ?, budget_from = ? WHERE id = ?", (run_id, now, copy.id)
    )
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.RUN_RESENT,
        now=now,
        schedule_id=schedule.id,
        run_id=copy.id,
        actor=actor,
        data={
            "scheduled_for": format_scheduled_for(slot),
            "idempotency_key": copy.idempotency_key,
            "resend_of": original.id,
            "original_scheduled_for": format_scheduled_for(original.scheduled_for),
            "original_idempotency_key": original.idempotency_key,
        },
    )
    return must_get_run(conn, tenant_id=tenant_id, run_id=copy.id), True


def _body_digest(conn: Connection, run_id: str) -> str:
    row = conn.execute("SELECT body_digest FROM job_runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise StoreError(f"run {run_id} vanished inside its own transaction")
    return rows.text(row[0])


def _free_second(conn: Connection, schedule: Schedule, *, before: int) -> int:
    """The latest second before ``before`` with no row of ``schedule`` and no occurrence
    of its timing, within :data:`SLOT_WINDOW_MS`; Conflict if there is none."""
    low, high = before - SLOT_WINDOW_MS, before - 1000
    taken = {
        ms
        for (ms,) in conn.execute(
            "SELECT scheduled_for FROM job_runs WHERE schedule_id = ?"
            " AND scheduled_for BETWEEN ? AND ?",
            (schedule.id, low, high),
        )
    }
    taken.update(
        itertools.takewhile(lambda ms: ms <= high, occurrences(schedule.spec, after_ms=low - 1))
    )
    for slot in range(high, low - 1, -1000):
        if slot not in taken:
            return slot
    raise Conflict(
        f"schedule {schedule.id} fired or has a run at every second of the last"
        f" {SLOT_WINDOW_MS // 60_000} minutes, so a copy has no second of its own;"
        ' resend with {"key": "same"} instead'
    )
