"""Run states, the one transition table, and the row of a new run (ADR 0033).

    pending ──claim──▶ running ──succeed (2xx)─────────────────▶ succeeded
      │  ▲               │ ├──retry (retryable answer)─────────▶ retry_wait
      │  │               │ ├──reclaim (lease lost, restart)────▶ retry_wait
      │  │               │ ├──defer (origin's breaker open: not sent)──▶ retry_wait
      │  │               │ └──fail (permanent, or exhausted)───▶ failed
      │  │   retry_wait ──claim──▶ running
      │  │   retry_wait ──fail (reclaimed, no attempts left)──▶ failed
      │  │   retry_wait ──cancel──▶ cancelled
      ├──┼──skip (overlap: an earlier run still open, docs/schedules.md)──▶ missed
      └──┼──cancel (schedule paused, deleted or edited)──▶ cancelled
         └──replay── succeeded | failed | missed | cancelled  (same run, same key)
    missed: inserted so by the planner (catch-up policy); delivered only if replayed

The same table, one transition a line (tests/core/test_runs.py checks it against
:data:`TRANSITIONS`):

    pending     claim    running
    retry_wait  claim    running
    running     succeed  succeeded
    running     retry    retry_wait
    running     fail     failed
    running     reclaim  retry_wait
    running     defer    retry_wait
    pending     cancel   cancelled
    pending     skip     missed
    retry_wait  cancel   cancelled
    retry_wait  fail     failed
    succeeded   replay   pending
    failed      replay   pending
    missed      replay   pending
    cancelled   replay   pending

Every state change in the engine and the store goes through :func:`check_transition`;
anything the table does not list raises :class:`IllegalTransition`.

A new run's row (:class:`NewRun`) is built by :func:`occurrence_run` alone, for the
planner and for a manual trigger alike: its id and idempotency key derive from the
schedule id and the canonical ``scheduled_for`` (:func:`appliance.core.ids.occurrence_ids`).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from appliance.core.ids import occurrence_ids
from appliance.core.instants import format_scheduled_for
from appliance.errors import IllegalTransition


class RunState(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    MISSED = "missed"
    CANCELLED = "cancelled"


class Transition(enum.StrEnum):
    CLAIM = "claim"
    SUCCEED = "succeed"
    RETRY = "retry"
    FAIL = "fail"
    RECLAIM = "reclaim"  # lease expired or a previous incarnation died: back to retry_wait
    CANCEL = "cancel"  # schedule deleted, paused or edited before the run started
    REPLAY = "replay"  # tenant asked for a terminal run again
    SKIP = "skip"  # due while an earlier run of its schedule is open (overlap policy)
    DEFER = "defer"  # claimed while its origin's breaker is open: not sent, not charged


class AttemptOutcome(enum.StrEnum):
    OK = "ok"
    RETRYABLE = "retryable"
    PERMANENT = "permanent"
    ABANDONED = "abandoned"  # its executor died or lost the lease; counted as an attempt
    STALE = "stale"  # completed after its lease was taken away: recorded, changes nothing


TERMINAL: frozenset[RunState] = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.MISSED, RunState.CANCELLED}
)
CLAIMABLE: frozenset[RunState] = frozenset({RunState.PENDING, RunState.RETRY_WAIT})

_S = RunState
TRANSITIONS: dict[tuple[RunState, Transition], RunState] = {
    (_S.PENDING, Transition.CLAIM): _S.RUNNING,
    (_S.RETRY_WAIT, Transition.CLAIM): _S.RUNNING,
    (_S.RUNNING, Transition.SUCCEED): _S.SUCCEEDED,
    (_S.RUNNING, Transition.RETRY): _S.RETRY_WAIT,
    (_S.RUNNING, Transition.FAIL): _S.FAILED,
    (_S.RUNNING, Transition.RECLAIM): _S.RETRY_WAIT,
    (_S.RUNNING, Transition.DEFER): _S.RETRY_WAIT,
    (_S.PENDING, Transition.CANCEL): _S.CANCELLED,
    (_S.PENDING, Transition.SKIP): _S.MISSED,
    (_S.RETRY_WAIT, Transition.CANCEL): _S.CANCELLED,
    (_S.RETRY_WAIT, Transition.FAIL): _S.FAILED,  # reclaimed with no attempts left
    **{(state, Transition.REPLAY): _S.PENDING for state in TERMINAL},
}


def check_transition(state: RunState, transition: Transition) -> RunState:
    """The state ``transition`` leads to from ``state``; raises if the table forbids it."""
    try:
        return TRANSITIONS[(state, transition)]
    except KeyError:
        raise IllegalTransition(f"a {state} run cannot {transition}") from None


def sources(transition: Transition) -> frozenset[RunState]:
    """Every state ``transition`` may start from (for SQL ``state IN (...)`` guards)."""
    return frozenset(state for (state, t) in TRANSITIONS if t is transition)


class Trigger(enum.StrEnum):
    SCHEDULE = "schedule"  # materialised by the planner
    MANUAL = "manual"  # a tenant asked for it now


class NewRun(NamedTuple):
    """A run row about to be inserted; the field names are the ``job_runs`` columns. A
    named tuple rather than a frozen dataclass: the planner builds one per occurrence, and
    the dataclass cost several times more to build."""

    id: str
    tenant_id: str
    schedule_id: str
    schedule_version: int
    scheduled_for: int
    idempotency_key: str
    due_at: int
    state: RunState  # pending, or missed for an occurrence the catch-up policy drops
    trigger: Trigger
    body_digest: str
    overlap: str | None = None  # the schedule's overlap policy unless `allow` (store/overlap)
    failure_reason: str | None = None  # a missed run's reason, on the row (not only an event)


def occurrence_run(
    *,
    schedule_id: str,
    tenant_id: str,
    schedule_version: int,
    scheduled_for: int,
    due_at: int,
    state: RunState,
    trigger: Trigger,
    body_digest: str,
    overlap: str | None = None,
    missed_reason: str | None = None,
) -> NewRun:
    """The row for one occurrence of a schedule; id and key derive from the canonical
    instant (ADR 0037), so the same occurrence always gets the same run. A ``missed`` row
    carries its ``missed_reason`` (as ``failure_reason``), a pending one none."""
    if state not in (RunState.PENDING, RunState.MISSED):
        raise ValueError(f"a new run is pending or missed, not {state}")
    if (state is RunState.MISSED) != (missed_reason is not None):
        raise ValueError("a missed run, and only a missed run, carries a reason")
    run_id, key = occurrence_ids(schedule_id, format_scheduled_for(scheduled_for))
    return NewRun(
        run_id,
        tenant_id,
        schedule_id,
        schedule_version,
        scheduled_for,
        key,
        due_at,
        state,
        trigger,
        body_digest,
        overlap,
        missed_reason,
    )
