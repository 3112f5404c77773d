"""The run page's words for each attempt's retry decision, and the schedule page's retry
policy lines (ui/inspector.py): pure functions of the records."""

from __future__ import annotations

from dataclasses import replace

from appliance.core.retry import ExponentialBackoff, RetryPolicy
from appliance.core.runs import AttemptOutcome, RunState, Trigger
from appliance.store.runs import AttemptRecord, RunRecord
from appliance.ui.inspector import decision, retry_lines

RUN = RunRecord(
    id="run_x",
    tenant_id="ten_x",
    schedule_id="sch_x",
    schedule_version=1,
    scheduled_for=0,
    idempotency_key="k",
    due_at=0,
    state=RunState.FAILED,
    trigger=Trigger.SCHEDULE,
    attempt=2,
    last_status=None,
    last_error=None,
    failure_reason="exhausted",
    created_at=0,
    updated_at=0,
    finished_at=0,
)


def attempt(n: int, outcome: AttemptOutcome | None, status: int | None = None) -> AttemptRecord:
    return AttemptRecord(
        run_id="run_x",
        attempt=n,
        started_at=0,
        finished_at=None if outcome is None else 1,
        outcome=outcome,
        http_status=status,
        error=None if status else "timeout",
        latency_ms=1,
        response_excerpt=None,
    )


def test_each_outcome_says_what_followed() -> None:
    attempts = [attempt(1, AttemptOutcome.ABANDONED), attempt(2, AttemptOutcome.RETRYABLE)]
    assert decision(RUN, attempts, 0) == (
        "Taken back from its executor (lease lapsed or restart); retried as attempt 2."
    )
    assert decision(RUN, attempts, 1) == "timeout: retryable, but the run failed (exhausted)."
    waiting = replace(RUN, state=RunState.RETRY_WAIT, failure_reason=None)
    assert decision(waiting, attempts, 1) == (
        "timeout: retryable; the next attempt waits for its delay."
    )
    assert decision(RUN, [attempt(1, None)], 0) == "In flight: no answer yet."
    stale = [attempt(1, AttemptOutcome.STALE, 200)]
    assert decision(RUN, stale, 0).startswith("Answered after its lease was taken back")


def test_the_retry_policy_reads_in_words() -> None:
    policy = RetryPolicy(
        max_attempts=3,
        backoff=ExponentialBackoff(initial_s=10, factor=2.0, max_s=600),
        window_ms=3_600_000,
        non_retryable_status=frozenset({404, 400}),
    )
    assert retry_lines(policy) == [
        ("Attempts", "3"),
        ("Delays", "exponential: 10 s × 2, at most 10 min; ×0.8–1.2 at random"),
        ("Gives up after", "1 h from the occurrence"),
        ("Never retries", "400, 404"),
    ]


def test_default_delays_read_in_their_largest_unit() -> None:
    assert retry_lines(RetryPolicy())[1:3] == [
        (
            "Delays",
            "5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (the last repeats); ×0.8–1.2 at random",
        ),
        ("Gives up after", "7 d from the occurrence"),
    ]
