"""Runs a tenant asks for: a manual trigger of a schedule, and a replay of a finished run
(ADR 0037: a double-click is one occurrence; ADR 0033: a replay is the same run).

Rules this module guards:

- A trigger is an occurrence at ``now`` floored to the second, due now, inserted like
  any planned one (:func:`appliance.store.materialise.insert_runs`): two triggers within
  one second are the same occurrence, so the second finds the first.
- A replay reopens a *finished* run as ``pending``, due now: same id, same key, attempt
  numbers keep counting, and a fresh attempt budget and retry window start now
  (:class:`appliance.core.retry.RetryBudget`). A deleted schedule never fires again, not
  even an old occurrence.
"""

from __future__ import annotations

import apsw

from appliance.core.runs import (
    RunState,
    Transition,
    Trigger,
    check_transition,
    occurrence_run,
    sources,
)
from appliance.errors import Conflict, NotFound
from appliance.store.materialise import insert_runs, store_body
from appliance.store.runs import RunRecord, expect_one, get_run, must_get_run
from appliance.store.schedules import get_schedule, require_schedule


def trigger_schedule(
    conn: apsw.Connection, *, tenant_id: str, schedule_id: str, now: int
) -> tuple[RunRecord, bool]:
    """A manual occurrence of a live schedule at ``now`` (whole second), due now:
    ``(run, created)``; ``created`` is False when this second was already triggered."""
    schedule = require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    spec = schedule.spec
    run = occurrence_run(
        schedule_id=schedule.id,
        tenant_id=schedule.tenant_id,
        schedule_version=schedule.version,
        scheduled_for=now - now % 1000,
        due_at=now,
        state=RunState.PENDING,
        trigger=Trigger.MANUAL,
        body_digest=store_body(conn, content_type=spec.content_type, body=spec.body),
    )
    created = bool(insert_runs(conn, [run], now=now))
    return must_get_run(conn, tenant_id=tenant_id, run_id=run.id), created


def replay_run(conn: apsw.Connection, *, tenant_id: str, run_id: str, now: int) -> RunRecord:
    """Reopen a finished run of a live schedule as ``pending``, due now. NotFound;
    Conflict if the run is not finished or its schedule was deleted."""
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    if get_schedule(conn, tenant_id=tenant_id, schedule_id=run.schedule_id) is None:
        raise Conflict(f"run {run_id} belongs to a deleted schedule; it cannot be replayed")
    if run.state not in sources(Transition.REPLAY):
        raise Conflict(
            f"run {run_id} is {run.state}; only finished runs (succeeded, failed, missed,"
            " cancelled) can be replayed"
        )
    target = check_transition(run.state, Transition.REPLAY)
    conn.execute(
        "UPDATE job_runs SET state = ?, due_at = ?, failure_reason = NULL, finished_at = NULL,"
        " attempt_base = attempt, budget_from = ?, updated_at = ? WHERE id = ? AND state = ?",
        (target.value, now, now, now, run_id, run.state.value),
    )
    expect_one(conn, f"replay of {run_id}")
    return must_get_run(conn, tenant_id=tenant_id, run_id=run_id)
