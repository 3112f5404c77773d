"""Outcome classification and retry decisions, per ADR 0032's outcome table."""

from __future__ import annotations

from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.instants import parse_instant, to_datetime
from appliance.core.retry import (
    DAY_MS,
    DEFAULT_DELAYS_S,
    RESTART_LIMIT,
    Decision,
    ExponentialBackoff,
    FailureReason,
    RetryBudget,
    RetryPolicy,
    TransportFailure,
    Verdict,
    classify_failure,
    classify_response,
    decide,
    decide_after_abandon,
    decide_after_restart,
    decide_reclaim,
    parse_retry_after,
    retry_delay_ms,
)
from appliance.core.runs import AttemptOutcome, Transition

NOW = parse_instant("2026-08-06T03:00:05Z")
SCHEDULED_FOR = parse_instant("2026-08-06T03:00:00Z")
OK = AttemptOutcome.OK
RETRYABLE = AttemptOutcome.RETRYABLE
PERMANENT = AttemptOutcome.PERMANENT


@pytest.mark.parametrize(
    ("status", "outcome", "reason", "min_delay_ms", "pause"),
    [
        (200, OK, None, 0, False),
        (201, OK, None, 0, False),
        (204, OK, None, 0, False),
        (299, OK, None, 0, False),
        (410, PERMANENT, FailureReason.GONE, 0, True),
        (301, RETRYABLE, None, 0, False),
        (302, RETRYABLE, None, 0, False),
        (304, RETRYABLE, None, 0, False),
        (307, RETRYABLE, None, 0, False),
        (308, RETRYABLE, None, 0, False),
        (429, RETRYABLE, None, 60_000, False),
        (400, RETRYABLE, None, 0, False),
        (401, RETRYABLE, None, 0, False),
        (404, RETRYABLE, None, 0, False),
        (500, RETRYABLE, None, 0, False),
        (502, RETRYABLE, None, 0, False),
        (503, RETRYABLE, None, 0, False),
        (100, RETRYABLE, None, 0, False),
    ],
)
def test_response_classification_table(
    status: int,
    outcome: AttemptOutcome,
    reason: FailureReason | None,
    min_delay_ms: int,
    pause: bool,
) -> None:
    verdict = classify_response(status, None, now_ms=NOW)
    assert verdict.outcome is outcome
    assert verdict.reason is reason
    assert verdict.min_delay_ms == min_delay_ms
    assert verdict.pause_schedule is pause
    assert verdict.retry_after_ms is None


@pytest.mark.parametrize(
    ("failure", "outcome", "reason", "min_delay_ms"),
    [
        (TransportFailure.CONNECT, RETRYABLE, None, 0),
        (TransportFailure.DNS, RETRYABLE, None, 0),
        (TransportFailure.TLS, RETRYABLE, None, 0),
        (TransportFailure.PROTOCOL, RETRYABLE, None, 0),
        (TransportFailure.TIMEOUT, RETRYABLE, None, 60_000),
        (TransportFailure.DEADLINE, RETRYABLE, None, 60_000),
        (TransportFailure.BLOCKED, PERMANENT, FailureReason.DESTINATION_BLOCKED, 0),
    ],
)
def test_failure_classification_table(
    failure: TransportFailure,
    outcome: AttemptOutcome,
    reason: FailureReason | None,
    min_delay_ms: int,
) -> None:
    verdict = classify_failure(failure)
    assert (verdict.outcome, verdict.reason, verdict.min_delay_ms) == (
        outcome,
        reason,
        min_delay_ms,
    )
    assert verdict.pause_schedule is False


def test_enum_values_are_the_agreed_strings() -> None:
    assert [f.value for f in TransportFailure] == [
        "connect",
        "dns",
        "tls",
        "timeout",
        "protocol",
        "destination_blocked",
        "deadline",
    ]
    assert [r.value for r in FailureReason] == [
        "gone",
        "destination_blocked",
        "exhausted",
        "non_retryable_status",
    ]


def _http_date(ms: int) -> str:
    return format_datetime(to_datetime(ms), usegmt=True)


@pytest.mark.parametrize(
    ("header", "expected_ms"),
    [
        ("120", 120_000),
        ("  120 ", 120_000),
        ("0", 0),
        (_http_date(NOW + 3_600_000), 3_600_000),
        (_http_date(NOW - 3_600_000), 0),  # a date in the past: no extra wait
        ("Thu Aug  6 04:00:05 2026", 3_600_000),  # asctime form (no zone): read as GMT
        (_http_date(NOW + 3_600_000).replace("GMT", "-0000"), 3_600_000),
        ("Sun Nov  6 08:49:37 2050", DAY_MS),
        ("86400", DAY_MS),
        ("86401", DAY_MS),
        ("9" * 5000, DAY_MS),  # beyond int()'s digit limit: capped, not crashed
        (_http_date(NOW + 30 * DAY_MS), DAY_MS),
        ("-5", None),
        ("1.5", None),
        ("1e3", None),
        ("soon", None),
        ("", None),
        ("١٢٠", None),  # non-ASCII digits are not delay-seconds
        ("Wed, 99 Foo 2015 07:28:00 GMT", None),
        (None, None),
    ],
)
def test_retry_after_parsing(header: str | None, expected_ms: int | None) -> None:
    assert parse_retry_after(header, now_ms=NOW) == expected_ms


def test_429_and_503_carry_retry_after_and_other_statuses_ignore_it() -> None:
    assert classify_response(429, "600", now_ms=NOW).retry_after_ms == 600_000
    unavailable = classify_response(503, "600", now_ms=NOW)
    assert (unavailable.retry_after_ms, unavailable.min_delay_ms) == (600_000, 0)
    assert classify_response(500, "600", now_ms=NOW).retry_after_ms is None
    assert classify_response(502, "600", now_ms=NOW).retry_after_ms is None


def test_retry_after_never_shortens_the_wait() -> None:
    policy = RetryPolicy()
    verdict = classify_response(429, "1", now_ms=NOW)
    assert retry_delay_ms(policy, attempt=1, verdict=verdict, rand=0.5) == 60_000
    long = classify_response(429, "7200", now_ms=NOW)
    assert retry_delay_ms(policy, attempt=1, verdict=long, rand=0.5) == 7_200_000


def test_default_schedule_is_the_documented_one() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 8
    assert policy.backoff == DEFAULT_DELAYS_S == (5, 300, 1800, 7200, 18000, 36000, 36000)
    verdict = Verdict(outcome=RETRYABLE)
    midpoints = [retry_delay_ms(policy, attempt=n, verdict=verdict, rand=0.5) for n in range(1, 10)]
    assert midpoints == [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000] + [36_000_000] * 4


@pytest.mark.parametrize(("rand", "expected"), [(0.0, 240_000), (0.5, 300_000), (0.999, 359_880)])
def test_jitter_factor_spans_point_eight_to_one_point_two(rand: float, expected: int) -> None:
    verdict = Verdict(outcome=RETRYABLE)
    assert retry_delay_ms(RetryPolicy(), attempt=2, verdict=verdict, rand=rand) == expected


def _decide(
    verdict: Verdict,
    *,
    attempt: int = 1,
    policy: RetryPolicy | None = None,
    now: int = NOW,
    rand: float = 0.5,
) -> Decision:
    return decide(
        policy or RetryPolicy(),
        attempt=attempt,
        verdict=verdict,
        scheduled_for_ms=SCHEDULED_FOR,
        now_ms=now,
        rand=rand,
    )


def test_ok_succeeds_even_on_the_last_attempt() -> None:
    decision = _decide(classify_response(200, None, now_ms=NOW), attempt=8)
    assert decision == Decision(transition=Transition.SUCCEED, due_at=None, failure_reason=None)


def test_gone_fails_at_once_and_asks_to_pause() -> None:
    verdict = classify_response(410, None, now_ms=NOW)
    assert verdict.pause_schedule
    decision = _decide(verdict)
    assert (decision.transition, decision.failure_reason) == (Transition.FAIL, FailureReason.GONE)


def test_blocked_destination_fails_without_retry() -> None:
    decision = _decide(classify_failure(TransportFailure.BLOCKED))
    assert decision.transition is Transition.FAIL
    assert decision.failure_reason is FailureReason.DESTINATION_BLOCKED


def test_retryable_retries_after_the_delay() -> None:
    decision = _decide(classify_response(500, None, now_ms=NOW), attempt=1)
    assert decision == Decision(
        transition=Transition.RETRY, due_at=NOW + 5_000, failure_reason=None
    )


def test_timeout_waits_at_least_a_minute() -> None:
    decision = _decide(classify_failure(TransportFailure.TIMEOUT), attempt=1)
    assert decision.due_at == NOW + 60_000


def test_last_attempt_exhausts() -> None:
    decision = _decide(Verdict(outcome=RETRYABLE), attempt=8)
    assert decision == Decision(
        transition=Transition.FAIL, due_at=None, failure_reason=FailureReason.EXHAUSTED
    )


def test_a_retry_past_the_window_exhausts() -> None:
    policy = RetryPolicy(window_ms=3_600_000)
    late = SCHEDULED_FOR + 3_600_000 - 4_000  # 5 s delay lands 1 s past the window
    decision = _decide(Verdict(outcome=RETRYABLE), policy=policy, now=late)
    assert decision.failure_reason is FailureReason.EXHAUSTED
    just_in = _decide(Verdict(outcome=RETRYABLE), policy=policy, now=late - 1_000)
    assert just_in.due_at == SCHEDULED_FOR + 3_600_000


def test_retry_after_beyond_the_window_exhausts() -> None:
    policy = RetryPolicy(window_ms=3_600_000)
    decision = _decide(classify_response(429, "7200", now_ms=NOW), policy=policy)
    assert decision.failure_reason is FailureReason.EXHAUSTED


def test_abandoned_attempt_retries_at_once_or_exhausts() -> None:
    policy = RetryPolicy(max_attempts=3)
    retry = decide_after_abandon(policy, attempt=2, scheduled_for_ms=SCHEDULED_FOR, now_ms=NOW)
    assert retry == Decision(transition=Transition.RETRY, due_at=NOW, failure_reason=None)
    last = decide_after_abandon(policy, attempt=3, scheduled_for_ms=SCHEDULED_FOR, now_ms=NOW)
    assert last.failure_reason is FailureReason.EXHAUSTED
    late = decide_after_abandon(
        policy, attempt=1, scheduled_for_ms=SCHEDULED_FOR, now_ms=SCHEDULED_FOR + 8 * DAY_MS
    )
    assert late.failure_reason is FailureReason.EXHAUSTED


def test_a_restart_is_not_charged_but_is_bounded_in_a_row_and_by_the_window() -> None:
    policy = RetryPolicy(max_attempts=1)
    again = decide_after_restart(
        policy, abandoned_in_a_row=RESTART_LIMIT - 1, scheduled_for_ms=SCHEDULED_FOR, now_ms=NOW
    )
    assert again == Decision(transition=Transition.RETRY, due_at=NOW, failure_reason=None)
    loop = decide_after_restart(
        policy, abandoned_in_a_row=RESTART_LIMIT, scheduled_for_ms=SCHEDULED_FOR, now_ms=NOW
    )
    assert loop.failure_reason is FailureReason.EXHAUSTED
    late = decide_after_restart(
        policy,
        abandoned_in_a_row=1,
        scheduled_for_ms=SCHEDULED_FOR,
        now_ms=SCHEDULED_FOR + 8 * DAY_MS,
    )
    assert late.failure_reason is FailureReason.EXHAUSTED
    with pytest.raises(ValueError, match="counts this attempt"):
        decide_after_restart(
            policy, abandoned_in_a_row=0, scheduled_for_ms=SCHEDULED_FOR, now_ms=NOW
        )


def test_a_reclaim_is_decided_here_charged_for_a_lapsed_lease_not_for_a_restart() -> None:
    policy = RetryPolicy(max_attempts=3)
    replayed = RetryBudget(attempt_base=4, window_start=SCHEDULED_FOR)  # 4 attempts before
    lapsed = decide_reclaim(
        policy, budget=replayed, attempt=6, restart=False, abandoned_in_a_row=1, now_ms=NOW
    )
    assert lapsed == Decision(
        transition=Transition.RECLAIM, due_at=NOW, failure_reason=None, charged=True
    )
    last = decide_reclaim(
        policy, budget=replayed, attempt=7, restart=False, abandoned_in_a_row=1, now_ms=NOW
    )
    assert last.transition is Transition.FAIL and last.failure_reason is FailureReason.EXHAUSTED
    # A restart ignores the budget (attempt 7 of 3) but not the run of restarts in a row.
    restart = decide_reclaim(
        policy, budget=replayed, attempt=7, restart=True, abandoned_in_a_row=2, now_ms=NOW
    )
    assert restart == Decision(
        transition=Transition.RECLAIM, due_at=NOW, failure_reason=None, charged=False
    )
    looping = decide_reclaim(
        policy,
        budget=replayed,
        attempt=7,
        restart=True,
        abandoned_in_a_row=RESTART_LIMIT,
        now_ms=NOW,
    )
    assert looping.transition is Transition.FAIL and not looping.charged


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": 16},
        {"window_ms": 0},
        {"window_ms": 7 * DAY_MS + 1},
        {"backoff": ()},
        {"backoff": (5, -1)},
    ],
)
def test_policy_bounds(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_policy_accepts_its_limits() -> None:
    assert RetryPolicy(max_attempts=1, window_ms=7 * DAY_MS).max_attempts == 1
    assert RetryPolicy(max_attempts=15).max_attempts == 15


@pytest.mark.parametrize(
    "kwargs",
    [
        {"outcome": PERMANENT},
        {"outcome": RETRYABLE, "reason": FailureReason.GONE},
        {"outcome": AttemptOutcome.ABANDONED},
        {"outcome": RETRYABLE, "min_delay_ms": -1},
    ],
)
def test_inconsistent_verdicts_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Verdict(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("attempt", "rand"), [(0, 0.5), (1, 1.0), (1, -0.1)])
def test_attempt_and_rand_are_checked(attempt: int, rand: float) -> None:
    with pytest.raises(ValueError):
        _decide(Verdict(outcome=RETRYABLE), attempt=attempt, rand=rand)


# --- properties --------------------------------------------------------------------------

_policies = st.builds(
    RetryPolicy,
    max_attempts=st.integers(1, 15),
    backoff=st.lists(st.integers(0, 86_400), min_size=1, max_size=16).map(tuple),
    window_ms=st.integers(1, 7 * DAY_MS),
)
_rands = st.floats(0.0, 1.0, exclude_max=True)
_non_ok = st.one_of(
    st.sampled_from([*range(300, 600)]).map(lambda s: classify_response(s, None, now_ms=NOW)),
    st.sampled_from(list(TransportFailure)).map(classify_failure),
    st.integers(0, 200_000).map(lambda s: classify_response(429, str(s), now_ms=NOW)),
)


@given(policy=_policies, attempt=st.integers(1, 40), rand=_rands)
def test_plain_delays_stay_within_jitter_bounds(
    policy: RetryPolicy, attempt: int, rand: float
) -> None:
    base_ms = policy.base_delay_ms(attempt)
    delay = retry_delay_ms(policy, attempt=attempt, verdict=Verdict(outcome=RETRYABLE), rand=rand)
    assert base_ms * 0.8 <= delay <= base_ms * 1.2


@given(policy=_policies, attempt=st.integers(1, 40), rand=_rands, verdict=_non_ok)
def test_minimums_only_lengthen_the_jittered_delay(
    policy: RetryPolicy, attempt: int, rand: float, verdict: Verdict
) -> None:
    plain = retry_delay_ms(policy, attempt=attempt, verdict=Verdict(outcome=RETRYABLE), rand=rand)
    if verdict.outcome is RETRYABLE:
        delay = retry_delay_ms(policy, attempt=attempt, verdict=verdict, rand=rand)
        assert delay == max(plain, verdict.min_delay_ms, verdict.retry_after_ms or 0)


@given(
    policy=_policies,
    verdicts=st.lists(_non_ok, min_size=1, max_size=20),
    rands=st.lists(_rands, min_size=20, max_size=20),
)
def test_a_failing_run_never_succeeds_and_stops_at_its_budget(
    policy: RetryPolicy, verdicts: list[Verdict], rands: list[float]
) -> None:
    now = SCHEDULED_FOR
    for attempt, (verdict, rand) in enumerate(zip(verdicts, rands, strict=False), start=1):
        decision = decide(
            policy,
            attempt=attempt,
            verdict=verdict,
            scheduled_for_ms=SCHEDULED_FOR,
            now_ms=now,
            rand=rand,
        )
        assert decision.transition is not Transition.SUCCEED
        if attempt >= policy.max_attempts:
            assert decision.transition is Transition.FAIL
        if decision.transition is Transition.FAIL:
            assert decision.due_at is None
            assert decision.failure_reason is not None
            return
        assert decision.due_at is not None
        assert now <= decision.due_at <= SCHEDULED_FOR + policy.window_ms
        now = decision.due_at
    assert len(verdicts) < policy.max_attempts


# --- per-schedule policies (docs/schedules.md, "Retry policy") ---------------------------


def test_a_backoff_list_is_followed_and_its_last_value_repeats() -> None:
    policy = RetryPolicy(backoff=(1, 10, 60))
    plain = Verdict(outcome=RETRYABLE)
    delays = [retry_delay_ms(policy, attempt=n, verdict=plain, rand=0.5) for n in range(1, 6)]
    assert delays == [1_000, 10_000, 60_000, 60_000, 60_000]


def test_an_exponential_backoff_grows_by_its_factor_up_to_its_max() -> None:
    policy = RetryPolicy(backoff=ExponentialBackoff(initial_s=10, factor=3.0, max_s=600))
    assert [policy.base_delay_ms(n) for n in range(1, 7)] == [
        10_000,
        30_000,
        90_000,
        270_000,
        600_000,
        600_000,
    ]
    huge = RetryPolicy(backoff=ExponentialBackoff(initial_s=1, factor=10.0, max_s=86_400))
    assert huge.base_delay_ms(10_000) == 86_400_000  # no float overflow, just the cap


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_s": 10, "factor": 0.5, "max_s": 60},
        {"initial_s": 10, "factor": 11.0, "max_s": 60},
        {"initial_s": 61, "factor": 2.0, "max_s": 60},
    ],
)
def test_exponential_bounds(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ExponentialBackoff(**kwargs)


def test_retry_on_status_retries_only_those_and_fails_the_rest_at_once() -> None:
    policy = RetryPolicy(retry_on_status=frozenset({503, 429}))
    for status in (500, 404, 302):
        verdict = classify_response(status, None, now_ms=NOW, policy=policy)
        assert verdict.reason is FailureReason.NON_RETRYABLE_STATUS
        decision = _decide(verdict, policy=policy)
        assert decision.transition is Transition.FAIL
        assert decision.failure_reason is FailureReason.NON_RETRYABLE_STATUS
    assert classify_response(503, None, now_ms=NOW, policy=policy).outcome is RETRYABLE
    assert classify_response(200, None, now_ms=NOW, policy=policy).outcome is OK
    assert classify_response(410, None, now_ms=NOW, policy=policy).reason is FailureReason.GONE


def test_non_retryable_status_fails_those_and_retries_the_rest() -> None:
    policy = RetryPolicy(non_retryable_status=frozenset({400, 422}))
    bad = classify_response(422, None, now_ms=NOW, policy=policy)
    assert (bad.outcome, bad.reason) == (PERMANENT, FailureReason.NON_RETRYABLE_STATUS)
    assert classify_response(500, None, now_ms=NOW, policy=policy).outcome is RETRYABLE
    # Transport failures are not statuses: the table decides them whatever the lists say.
    assert classify_failure(TransportFailure.CONNECT).outcome is RETRYABLE


def test_the_two_status_lists_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclude"):
        RetryPolicy(retry_on_status=frozenset({500}), non_retryable_status=frozenset({400}))


def test_503_retry_after_lengthens_the_wait_as_429s_does() -> None:
    policy = RetryPolicy(backoff=(1,))
    verdict = classify_response(503, "120", now_ms=NOW, policy=policy)
    assert _decide(verdict, policy=policy).due_at == NOW + 120_000
    date = classify_response(503, _http_date(NOW + 300_000), now_ms=NOW, policy=policy)
    assert _decide(date, policy=policy).due_at == NOW + 300_000


def test_a_retry_after_past_max_age_ends_the_run_instead_of_pushing_the_retry() -> None:
    policy = RetryPolicy(backoff=(1,), window_ms=600_000)  # max_age_seconds 600
    asked = classify_response(503, "3600", now_ms=NOW, policy=policy)
    decision = _decide(asked, policy=policy)
    assert (decision.transition, decision.failure_reason) == (
        Transition.FAIL,
        FailureReason.EXHAUSTED,
    )
    within = classify_response(503, "300", now_ms=NOW, policy=policy)
    assert _decide(within, policy=policy).due_at == NOW + 300_000


_backoffs = st.one_of(
    st.lists(st.integers(1, 86_400), min_size=1, max_size=14).map(tuple),
    st.builds(
        lambda initial, factor, extra: ExponentialBackoff(
            initial_s=initial, factor=factor, max_s=initial + extra
        ),
        st.integers(1, 86_400),
        st.floats(1.0, 10.0),
        st.integers(0, 86_400),
    ),
)
_tenant_policies = st.builds(
    RetryPolicy,
    max_attempts=st.integers(1, 15),
    backoff=_backoffs,
    window_ms=st.integers(1, 604_800).map(lambda s: s * 1000),
    non_retryable_status=st.frozensets(st.integers(300, 599)),
)
_answers = st.tuples(
    st.sampled_from([429, 503, 500, 404, 302]),
    st.one_of(
        st.none(),
        st.integers(0, 10**12).map(str),
        st.integers(-DAY_MS, 30 * DAY_MS).map(lambda ms: _http_date(NOW + ms)),
    ),
)


@given(
    policy=_tenant_policies,
    answers=st.lists(_answers, min_size=1, max_size=20),
    rands=st.lists(_rands, min_size=20, max_size=20),
    start=st.integers(0, 8 * DAY_MS),
)
def test_no_decision_is_ever_due_past_max_age(
    policy: RetryPolicy, answers: list[tuple[int, str | None]], rands: list[float], start: int
) -> None:
    """Whatever the receiver answers (Retry-After included), a retry is never scheduled
    after ``scheduled_for + max_age``: past it the run has failed."""
    now = SCHEDULED_FOR + start
    for attempt, ((status, retry_after), rand) in enumerate(
        zip(answers, rands, strict=False), start=1
    ):
        verdict = classify_response(status, retry_after, now_ms=now, policy=policy)
        decision = _decide(verdict, attempt=attempt, policy=policy, now=now, rand=rand)
        if decision.due_at is None:
            assert decision.transition is Transition.FAIL
            return
        assert now <= decision.due_at <= SCHEDULED_FOR + policy.window_ms
        now = decision.due_at


def _model_delay_s(backoff: tuple[int, ...] | ExponentialBackoff, n: int) -> float:
    if isinstance(backoff, tuple):
        return backoff[min(n, len(backoff)) - 1]
    return min(backoff.initial_s * backoff.factor ** (n - 1), backoff.max_s)


@given(policy=_tenant_policies, rands=st.lists(_rands, min_size=14, max_size=14))
def test_the_backoff_sequence_is_the_policys(policy: RetryPolicy, rands: list[float]) -> None:
    """Each wait of a plain failure is the policy's n-th delay times a factor in [0.8, 1.2]."""
    plain = Verdict(outcome=RETRYABLE)
    for n, rand in enumerate(rands, start=1):
        expected_ms = _model_delay_s(policy.backoff, n) * 1000
        assert policy.base_delay_ms(n) == pytest.approx(expected_ms, abs=1)
        base_ms = policy.base_delay_ms(n)  # whole ms: the jitter scales the rounded delay
        delay = retry_delay_ms(policy, attempt=n, verdict=plain, rand=rand)
        assert base_ms * 0.8 - 1 <= delay <= base_ms * 1.2 + 1
