"""Outcome classification and retry decisions (ADR 0032's outcome table, ADR 0033).

    response / failure                      verdict      reason               wait at least
    2xx                                     OK           -                    -
    410 Gone                                PERMANENT    gone (pause sched.)  -
    3xx (redirects are never followed)      RETRYABLE    -                    schedule
    a status the policy does not retry      PERMANENT    non_retryable_status -
    429 Too Many Requests                   RETRYABLE    -                    60 s, Retry-After
    503 Service Unavailable                 RETRYABLE    -                    schedule, Retry-After
    any other status                        RETRYABLE    -                    schedule
    transport: timeout, deadline            RETRYABLE    -                    60 s
    transport: blocked destination          PERMANENT    destination_blocked  -
    transport: connect, dns, tls, protocol  RETRYABLE    -                    schedule

Every decision is made from a :class:`RetryPolicy` value — a schedule's ``retry`` (tenant
JSON in :mod:`appliance.core.retry_input`), ADR 0032's defaults when it sets none. Retry
schedule: the delay after attempt ``n`` (1-based) is the policy's base delay ``n`` (a list's
``n``-th value, the last one repeating; or ``initial × factor^(n-1)`` capped at ``max``),
times a factor uniform in [0.8, 1.2), then raised to the verdict's minimum and to
``Retry-After`` (429 and 503) — which is honoured only upward and capped at 24 h. A run
fails ``exhausted`` when the attempt that just finished was its last (``max_attempts``) or
when the next attempt would be due after ``scheduled_for + window_ms`` (the policy's
``max_age_seconds``): a ``Retry-After`` reaching past that deadline ends the run at once
instead of pushing the retry beyond it, so no decision is ever due past it. A status the
policy does not retry (``retry_on_status`` / ``non_retryable_status``) fails the run with
reason ``non_retryable_status``. An attempt abandoned because
the appliance died is not charged to the budget (:func:`decide_after_restart`); one whose
lease merely expired is (:func:`decide_after_abandon`); :func:`decide_reclaim` picks between
the two for the store's reclaims, as :func:`decide` decides after an answered attempt: the
store only applies these decisions. Retrying never changes ``scheduled_for`` or the
idempotency key. Everything here is pure: time and randomness are parameters.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Final

from appliance.core.instants import from_datetime
from appliance.core.runs import AttemptOutcome, Transition

SECOND_MS = 1000
DAY_MS = 86_400 * SECOND_MS
SLOW_DOWN_MS = 60 * SECOND_MS  # 429 and timeouts: give the receiver at least a minute
RETRY_AFTER_CAP_MS = DAY_MS
MAX_ATTEMPTS_LIMIT = 15
DEFAULT_MAX_ATTEMPTS = 8
MAX_BACKOFF_FACTOR = 10.0
MAX_WINDOW_MS = 7 * DAY_MS
# Boot reclaims are not charged to a run's attempt budget (our crash, not the receiver's
# answer); a run abandoned by this many restarts in a row fails anyway, so an attempt that
# kills the process every time cannot crash-loop the appliance for the whole retry window.
RESTART_LIMIT = 20
DEFAULT_DELAYS_S: tuple[int, ...] = (5, 300, 1800, 7200, 18000, 36000, 36000)

# Longer digit strings are far beyond the cap; checking length first also keeps a hostile
# header away from int()'s digit limit.
_MAX_SECONDS_DIGITS = 9


class TransportFailure(enum.StrEnum):
    """Why an attempt got no HTTP response."""

    CONNECT = "connect"
    DNS = "dns"
    TLS = "tls"
    TIMEOUT = "timeout"
    PROTOCOL = "protocol"
    BLOCKED = "destination_blocked"  # the outbound policy refused the address
    DEADLINE = "deadline"  # the per-attempt hard deadline cancelled the request


class FailureReason(enum.StrEnum):
    """Why a run ended ``failed``."""

    GONE = "gone"
    DESTINATION_BLOCKED = "destination_blocked"
    EXHAUSTED = "exhausted"
    NON_RETRYABLE_STATUS = "non_retryable_status"  # the schedule's retry policy says stop


_VERDICT_OUTCOMES = frozenset(
    {AttemptOutcome.OK, AttemptOutcome.RETRYABLE, AttemptOutcome.PERMANENT}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What one finished attempt means. ``reason`` is set exactly for PERMANENT."""

    outcome: AttemptOutcome
    reason: FailureReason | None = None
    min_delay_ms: int = 0
    retry_after_ms: int | None = None
    pause_schedule: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in _VERDICT_OUTCOMES:
            raise ValueError(f"a verdict is ok, retryable or permanent, not {self.outcome}")
        if (self.outcome is AttemptOutcome.PERMANENT) != (self.reason is not None):
            raise ValueError("a failure reason is given exactly for a permanent verdict")
        if self.min_delay_ms < 0 or (self.retry_after_ms or 0) < 0:
            raise ValueError("delays are never negative")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialBackoff:
    """Base delay ``n`` is ``initial_s × factor^(n-1)`` seconds, at most ``max_s``."""

    initial_s: int
    factor: float
    max_s: int

    def __post_init__(self) -> None:
        if not 0 <= self.initial_s <= self.max_s:
            raise ValueError(f"need 0 <= initial ({self.initial_s}) <= max ({self.max_s})")
        if not 1.0 <= self.factor <= MAX_BACKOFF_FACTOR:
            raise ValueError(f"factor must be 1–{MAX_BACKOFF_FACTOR}, not {self.factor}")

    def delay_ms(self, attempt: int) -> int:
        cap_ms = self.max_s * SECOND_MS
        if self.initial_s == 0 or self.factor == 1.0:
            return self.initial_s * SECOND_MS
        # Past the cap no power is computed, so a large attempt cannot overflow the float.
        if (attempt - 1) * math.log(self.factor) >= math.log(self.max_s / self.initial_s):
            return cap_ms
        return min(round(self.initial_s * SECOND_MS * self.factor ** (attempt - 1)), cap_ms)


Backoff = tuple[int, ...] | ExponentialBackoff  # seconds after attempt 1, 2, …; or a curve


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """A schedule's retry budget: attempts, the delays between them, the overall window
    (``max_age_seconds`` × 1000, from ``scheduled_for`` or the last replay), and which
    HTTP statuses are retried: only ``retry_on_status`` when it is set, else every status
    but ``non_retryable_status`` (2xx is a success and 410 always ``gone``, whatever they
    say). Statuses are not about transport failures, which the table above decides."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = DEFAULT_DELAYS_S
    window_ms: int = MAX_WINDOW_MS
    retry_on_status: frozenset[int] | None = None
    non_retryable_status: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT:
            raise ValueError(
                f"max_attempts must be 1–{MAX_ATTEMPTS_LIMIT}, not {self.max_attempts}"
            )
        if not 0 < self.window_ms <= MAX_WINDOW_MS:
            raise ValueError(f"window_ms must be 1–{MAX_WINDOW_MS} (7 days), not {self.window_ms}")
        if isinstance(self.backoff, tuple) and (not self.backoff or min(self.backoff) < 0):
            raise ValueError("a backoff list needs at least one delay, none negative")
        if self.retry_on_status is not None and self.non_retryable_status:
            raise ValueError("retry_on_status and non_retryable_status exclude each other")

    def base_delay_ms(self, attempt: int) -> int:
        """The delay after attempt ``attempt`` (1-based) before jitter and minimums."""
        _check_attempt(attempt)
        if isinstance(self.backoff, ExponentialBackoff):
            return self.backoff.delay_ms(attempt)
        return self.backoff[min(attempt, len(self.backoff)) - 1] * SECOND_MS

    def retries_status(self, status: int) -> bool:
        """Whether a non-2xx answer ``status`` (not 410) may be retried."""
        if self.retry_on_status is not None:
            return status in self.retry_on_status
        return status not in self.non_retryable_status


DEFAULT_POLICY: Final = RetryPolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryBudget:
    """Where a run's attempt budget and retry window start: at materialisation, or at its
    last replay. Attempt numbers keep counting across replays and restarts (X-Attempt,
    attempts rows); the budget counts only the attempts charged to it since."""

    attempt_base: int  # attempts not charged: those before the last replay, and restarts
    window_start: int  # ms: scheduled_for, or the last replay instant

    def attempts_used(self, attempt: int) -> int:
        return attempt - self.attempt_base


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to do with the run: SUCCEED, RETRY (RECLAIM after an abandoned attempt) at
    ``due_at`` (epoch ms), or FAIL. ``charged``: False when the attempt just ended does not
    count against the run's budget (a restart), so the budget's base moves past it."""

    transition: Transition
    due_at: int | None
    failure_reason: FailureReason | None
    charged: bool = True


_OK = Verdict(outcome=AttemptOutcome.OK)
_RETRY = Verdict(outcome=AttemptOutcome.RETRYABLE)
_RETRY_SLOWLY = Verdict(outcome=AttemptOutcome.RETRYABLE, min_delay_ms=SLOW_DOWN_MS)
_GONE = Verdict(outcome=AttemptOutcome.PERMANENT, reason=FailureReason.GONE, pause_schedule=True)
_BLOCKED = Verdict(outcome=AttemptOutcome.PERMANENT, reason=FailureReason.DESTINATION_BLOCKED)
_NOT_RETRIED = Verdict(outcome=AttemptOutcome.PERMANENT, reason=FailureReason.NON_RETRYABLE_STATUS)


def classify_response(
    status: int, retry_after: str | None, *, now_ms: int, policy: RetryPolicy = DEFAULT_POLICY
) -> Verdict:
    """The verdict on an HTTP response under ``policy``'s status rules. ``retry_after`` is
    the raw ``Retry-After`` header, read only for 429 and 503 (RFC 9110 defines it for
    both); ``now_ms`` anchors an HTTP-date value."""
    if 200 <= status <= 299:
        return _OK
    if status == 410:
        return _GONE
    if not policy.retries_status(status):
        return _NOT_RETRIED
    if status == 429:
        return Verdict(
            outcome=AttemptOutcome.RETRYABLE,
            min_delay_ms=SLOW_DOWN_MS,
            retry_after_ms=parse_retry_after(retry_after, now_ms=now_ms),
        )
    if status == 503 and retry_after is not None:
        return Verdict(
            outcome=AttemptOutcome.RETRYABLE,
            retry_after_ms=parse_retry_after(retry_after, now_ms=now_ms),
        )
    return _RETRY  # 3xx included: redirects are not followed, so the attempt failed


def classify_failure(failure: TransportFailure) -> Verdict:
    """The verdict on an attempt that got no HTTP response."""
    if failure is TransportFailure.BLOCKED:
        return _BLOCKED
    if failure in (TransportFailure.TIMEOUT, TransportFailure.DEADLINE):
        return _RETRY_SLOWLY
    return _RETRY


def parse_retry_after(value: str | None, *, now_ms: int) -> int | None:
    """Milliseconds a ``Retry-After`` value asks to wait, capped at 24 h; None if absent or
    unreadable. Delay-seconds must be plain digits; an HTTP-date in the past means 0."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        if len(text) > _MAX_SECONDS_DIGITS:
            return RETRY_AFTER_CAP_MS
        return min(int(text) * SECOND_MS, RETRY_AFTER_CAP_MS)
    try:
        moment = parsedate_to_datetime(text)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None  # the header is the receiver's free text: unreadable means absent
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # asctime and "-0000" forms: HTTP-dates are GMT
    return min(max(from_datetime(moment) - now_ms, 0), RETRY_AFTER_CAP_MS)


def retry_delay_ms(policy: RetryPolicy, *, attempt: int, verdict: Verdict, rand: float) -> int:
    """How long to wait after attempt ``attempt`` (1-based) before the next one.

    ``rand`` in [0, 1) picks the factor in [0.8, 1.2); integer maths keeps the lower bound
    exact."""
    _check_attempt(attempt)
    if not 0.0 <= rand < 1.0:
        raise ValueError(f"rand must be in [0, 1), got {rand}")
    base_ms = policy.base_delay_ms(attempt)
    jittered = base_ms * 4 // 5 + int(base_ms * 2 * rand) // 5
    return max(jittered, verdict.min_delay_ms, verdict.retry_after_ms or 0)


def decide(
    policy: RetryPolicy,
    *,
    attempt: int,
    verdict: Verdict,
    scheduled_for_ms: int,
    now_ms: int,
    rand: float,
) -> Decision:
    """What follows attempt ``attempt`` (1-based, just finished at ``now_ms``)."""
    _check_attempt(attempt)
    if verdict.outcome is AttemptOutcome.OK:
        return Decision(transition=Transition.SUCCEED, due_at=None, failure_reason=None)
    if verdict.outcome is AttemptOutcome.PERMANENT:
        return _fail(verdict.reason or FailureReason.EXHAUSTED)  # reason is set (post_init)
    if attempt >= policy.max_attempts:
        return _fail(FailureReason.EXHAUSTED)
    due_at = now_ms + retry_delay_ms(policy, attempt=attempt, verdict=verdict, rand=rand)
    return _retry_within_window(policy, due_at=due_at, scheduled_for_ms=scheduled_for_ms)


def decide_after_abandon(
    policy: RetryPolicy, *, attempt: int, scheduled_for_ms: int, now_ms: int
) -> Decision:
    """What follows an attempt whose executor died or lost its lease: it counts as an
    attempt, and the next one is due at once (nothing suggests the receiver needs a pause).
    The caller applies RETRY as the RECLAIM transition."""
    _check_attempt(attempt)
    if attempt >= policy.max_attempts:
        return _fail(FailureReason.EXHAUSTED)
    return _retry_within_window(policy, due_at=now_ms, scheduled_for_ms=scheduled_for_ms)


def decide_after_restart(
    policy: RetryPolicy, *, abandoned_in_a_row: int, scheduled_for_ms: int, now_ms: int
) -> Decision:
    """What follows an attempt cut short because the whole appliance died (the boot
    reclaim). The crash is ours, not the receiver's answer, so the attempt is recorded but
    not charged to the budget: the next one is due at once whatever ``max_attempts`` says.
    Two bounds remain: the retry window, and ``RESTART_LIMIT`` attempts abandoned in a row
    (counting this one), after which the run fails ``exhausted``."""
    if abandoned_in_a_row < 1:
        raise ValueError(f"abandoned_in_a_row counts this attempt, got {abandoned_in_a_row}")
    if abandoned_in_a_row >= RESTART_LIMIT:
        return _fail(FailureReason.EXHAUSTED)
    return _retry_within_window(policy, due_at=now_ms, scheduled_for_ms=scheduled_for_ms)


def decide_reclaim(
    policy: RetryPolicy,
    *,
    budget: RetryBudget,
    attempt: int,
    restart: bool,
    abandoned_in_a_row: int,
    now_ms: int,
) -> Decision:
    """What follows the abandoned attempt ``attempt`` of a run taken back from its executor:
    RECLAIM (due at once) or FAIL. ``restart``: the whole appliance died (the boot reclaim),
    so the attempt is not charged (:func:`decide_after_restart`, bounded by
    ``abandoned_in_a_row``, this attempt included); otherwise its lease lapsed and it is
    (:func:`decide_after_abandon`)."""
    if restart:
        decision = decide_after_restart(
            policy,
            abandoned_in_a_row=abandoned_in_a_row,
            scheduled_for_ms=budget.window_start,
            now_ms=now_ms,
        )
    else:
        decision = decide_after_abandon(
            policy,
            attempt=budget.attempts_used(max(attempt, 1)),
            scheduled_for_ms=budget.window_start,
            now_ms=now_ms,
        )
    transition = Transition.RECLAIM if decision.transition is Transition.RETRY else Transition.FAIL
    return Decision(
        transition=transition,
        due_at=decision.due_at,
        failure_reason=decision.failure_reason,
        charged=not restart,
    )


def _retry_within_window(policy: RetryPolicy, *, due_at: int, scheduled_for_ms: int) -> Decision:
    if due_at > scheduled_for_ms + policy.window_ms:
        return _fail(FailureReason.EXHAUSTED)
    return Decision(transition=Transition.RETRY, due_at=due_at, failure_reason=None)


def _fail(reason: FailureReason) -> Decision:
    return Decision(transition=Transition.FAIL, due_at=None, failure_reason=reason)


def _check_attempt(attempt: int) -> None:
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
