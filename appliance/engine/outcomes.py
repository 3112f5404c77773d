"""What one attempt's result becomes: the :class:`~appliance.store.completions.Completion`
the dispatcher records for it (:mod:`appliance.engine.dispatcher`, whose module rules
these follow; the decisions themselves are :mod:`appliance.core.retry`'s).

- An answer is classified by its status (and ``Retry-After``), a failure by its class.
- A delivery that ran out of its own ``timeout_seconds`` is a ``deadline`` failure.
- A delivery the executor cut short for its lease is ``abandoned``, decided as the
  reaper's reclaim of a lapsed lease would be.
"""

from __future__ import annotations

import trio

from appliance.clock import WallClock
from appliance.core.retry import (
    TransportFailure,
    Verdict,
    classify_failure,
    classify_response,
    decide,
    decide_reclaim,
)
from appliance.core.runs import AttemptOutcome
from appliance.engine.delivery import SendResult
from appliance.engine.in_flight import InFlight
from appliance.store.claims import ClaimedRun
from appliance.store.completions import Completion


def timed_out(live: InFlight, started: float) -> SendResult:
    """The schedule's own timeout ran out: a ``deadline`` failure."""
    error = f"no response within the {live.run.timeout_seconds} s deadline"
    return SendResult.failed(error, started=started, failure=TransportFailure.DEADLINE)


def given_up(
    live: InFlight, started: float, *, signed_at: int | None, clock: WallClock
) -> Completion:
    """The attempt this executor cut short itself because its lease lapsed or could
    lapse: ``abandoned``, decided as the reaper's reclaim of a lapsed lease would be
    (:func:`appliance.core.retry.decide_reclaim`: charged, due again at once) — not a
    receiver's timeout, which would wait at least a minute. No failure class, so the
    target's circuit breaker does not count it against the receiver."""
    run = live.run
    if live.lapsed:
        error = "cancelled: its lease lapsed before a heartbeat could renew it"
    else:
        error = "cancelled before its lease could lapse (lease renewals are failing)"
    decision = decide_reclaim(
        run.retry,
        budget=run.budget,
        attempt=run.attempt,
        restart=False,
        abandoned_in_a_row=1,
        now_ms=clock.now_ms(),
    )
    return Completion(
        outcome=AttemptOutcome.ABANDONED,
        transition=decision.transition,
        due_at=decision.due_at,
        failure_reason=None if decision.failure_reason is None else decision.failure_reason.value,
        http_status=None,
        error=error,
        latency_ms=round((trio.current_time() - started) * 1000),
        response_excerpt=None,
        signed_at=signed_at,
    )


def classify(run: ClaimedRun, result: SendResult, *, clock: WallClock) -> Verdict:
    """An answer by its status (and ``Retry-After``), a failure by its class."""
    if result.status is not None:
        return classify_response(
            result.status, result.retry_after, now_ms=clock.now_ms(), policy=run.retry
        )
    return classify_failure(result.failure or TransportFailure.PROTOCOL)


def completion(
    run: ClaimedRun,
    verdict: Verdict,
    result: SendResult,
    *,
    signed_at: int | None,
    clock: WallClock,
    rand: float,
) -> Completion:
    """The verdict decided against the run's retry policy and budget (``rand``: the
    backoff's random factor), with what the attempt saw."""
    decision = decide(
        run.retry,
        attempt=run.budget.attempts_used(run.attempt),
        verdict=verdict,
        scheduled_for_ms=run.budget.window_start,
        now_ms=clock.now_ms(),
        rand=rand,
    )
    return Completion(
        outcome=verdict.outcome,
        transition=decision.transition,
        due_at=decision.due_at,
        failure_reason=None if decision.failure_reason is None else decision.failure_reason.value,
        http_status=result.status,
        error=result.error_text(),
        latency_ms=result.latency_ms,
        response_excerpt=result.excerpt or None,
        failure_class=None if result.failure is None else result.failure.value,
        pause_schedule=verdict.pause_schedule,
        signed_at=signed_at,
    )
