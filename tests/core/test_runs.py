"""The run transition table as the docstring draws it, and a new run's derived identity."""

from __future__ import annotations

import re

import pytest

from appliance.core import runs
from appliance.core.ids import idempotency_key, occurrence_ids, run_id
from appliance.core.instants import format_scheduled_for, parse_instant
from appliance.core.runs import TRANSITIONS, NewRun, RunState, Transition, Trigger, occurrence_run

AT = parse_instant("2026-08-06T03:00:00Z")


def test_the_docstring_lists_exactly_the_transition_table() -> None:
    states, transitions = "|".join(RunState), "|".join(Transition)
    line = re.compile(rf"^\s+({states})\s+({transitions})\s+({states})\s*$", re.MULTILINE)
    listed = {
        (RunState(source), Transition(transition)): RunState(target)
        for source, transition, target in line.findall(runs.__doc__ or "")
    }
    assert listed == TRANSITIONS


def test_a_new_runs_id_and_key_derive_from_the_occurrence_alone() -> None:
    text = format_scheduled_for(AT)
    assert occurrence_ids("sch_1", text) == (run_id("sch_1", text), idempotency_key("sch_1", text))
    planned, triggered = (
        occurrence_run(
            schedule_id="sch_1",
            tenant_id="ten_1",
            schedule_version=version,
            scheduled_for=AT,
            due_at=AT + 1_500,
            state=RunState.PENDING,
            trigger=trigger,
            body_digest="d",
        )
        for version, trigger in ((1, Trigger.SCHEDULE), (4, Trigger.MANUAL))
    )
    assert (planned.id, planned.idempotency_key) == occurrence_ids("sch_1", text)
    assert (triggered.id, triggered.idempotency_key) == (planned.id, planned.idempotency_key)


def test_a_new_run_is_pending_or_missed() -> None:
    with pytest.raises(ValueError, match="pending or missed"):
        occurrence_run(
            schedule_id="sch_1",
            tenant_id="ten_1",
            schedule_version=1,
            scheduled_for=AT,
            due_at=AT,
            state=RunState.RUNNING,
            trigger=Trigger.SCHEDULE,
            body_digest="d",
        )


def test_a_missed_run_and_only_a_missed_run_carries_its_reason_on_the_row() -> None:
    def new(state: RunState, reason: str | None) -> object:
        return occurrence_run(
            schedule_id="sch_1",
            tenant_id="ten_1",
            schedule_version=1,
            scheduled_for=AT,
            due_at=AT,
            state=state,
            trigger=Trigger.SCHEDULE,
            body_digest="d",
            missed_reason=reason,
        )

    missed = new(RunState.MISSED, "catchup_skip")
    assert isinstance(missed, NewRun) and missed.failure_reason == "catchup_skip"
    for state, reason in ((RunState.MISSED, None), (RunState.PENDING, "catchup_skip")):
        with pytest.raises(ValueError, match="carries a reason"):
            new(state, reason)
