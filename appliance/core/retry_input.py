"""A schedule's ``retry`` object: tenant JSON in, :class:`RetryPolicy` out, and back.

Rules this module guards (docs/schedules.md, "Retry policy"; ADR 0032's defaults):

- ``retry`` is ``{"max_attempts", "backoff", "max_age_seconds", "retry_on_status" |
  "non_retryable_status"}``, every key optional; an absent key takes ADR 0032's default, so
  a schedule that says nothing retries exactly as before.
- ``backoff`` is ``"default"`` (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), a list of
  1–:data:`MAX_BACKOFF_ENTRIES` delays in seconds (the last one repeats), or
  ``{"initial", "factor", "max"}`` (``initial × factor^(n-1)``, at most ``max``). Every
  delay is 1 s to :data:`MAX_BACKOFF_SECONDS`; the factor is 1 to 10.
- Status lists hold 1–:data:`MAX_STATUS_ENTRIES` codes from 100 to 599, never a 2xx (a
  success) and, for ``retry_on_status``, never 410 (``gone`` always stops); at most one of
  the two lists is given. They are echoed sorted, without duplicates.
- Every problem is a FieldError naming the exact place (``retry.backoff[2]``,
  ``retry.backoff.factor``), all reported at once.
- The stored form (:func:`stored_retry`) is the document without ``max_attempts`` (its own
  column), ``None`` when everything else is the default; :func:`stored_policy` reads it
  back through the same validation.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Final

from appliance.core.json_fields import FieldReader
from appliance.core.retry import (
    DEFAULT_DELAYS_S,
    DEFAULT_MAX_ATTEMPTS,
    MAX_ATTEMPTS_LIMIT,
    MAX_BACKOFF_FACTOR,
    MAX_WINDOW_MS,
    SECOND_MS,
    Backoff,
    ExponentialBackoff,
    RetryPolicy,
)

RETRY_FIELDS: Final = (
    "max_attempts",
    "backoff",
    "max_age_seconds",
    "retry_on_status",
    "non_retryable_status",
)
STATUS_FIELDS: Final = ("retry_on_status", "non_retryable_status")
_EXPONENTIAL_FIELDS: Final = ("initial", "factor", "max")
MAX_BACKOFF_SECONDS: Final = 86_400
MAX_BACKOFF_ENTRIES: Final = MAX_ATTEMPTS_LIMIT - 1  # only max_attempts - 1 delays are used
MAX_AGE_SECONDS: Final = MAX_WINDOW_MS // SECOND_MS
MAX_STATUS_ENTRIES: Final = 100
DEFAULT_BACKOFF: Final = "default"
_BACKOFF_HINT: Final = (
    'must be "default", a list of delays in seconds (e.g. [10, 60, 600]) or'
    ' {"initial": 10, "factor": 2, "max": 3600}'
)


def read_retry(fields: FieldReader) -> RetryPolicy:
    """The policy of the ``retry`` object behind ``fields`` (a nested reader); problems are
    recorded on it and the defaults stand in for bad values."""
    fields.unknown(RETRY_FIELDS)
    max_attempts = fields.integer(
        "max_attempts",
        default=DEFAULT_MAX_ATTEMPTS,
        low=1,
        high=MAX_ATTEMPTS_LIMIT,
        unit="attempts",
    )
    backoff = _backoff(fields)
    max_age = fields.integer(
        "max_age_seconds", default=MAX_AGE_SECONDS, low=1, high=MAX_AGE_SECONDS, unit="seconds"
    )
    retry_on = _statuses(fields, "retry_on_status")
    if fields.given("retry_on_status") and fields.given("non_retryable_status"):
        fields.fail(
            "non_retryable_status",
            "retry_on_status and non_retryable_status are both given; keep one: the statuses"
            " to retry, or the statuses not to retry",
        )
        return RetryPolicy(max_attempts=max_attempts, backoff=backoff, window_ms=max_age * 1000)
    not_retried = _statuses(fields, "non_retryable_status")
    return RetryPolicy(
        max_attempts=max_attempts,
        backoff=backoff,
        window_ms=max_age * SECOND_MS,
        retry_on_status=retry_on,
        non_retryable_status=not_retried or frozenset(),
    )


def _backoff(fields: FieldReader) -> Backoff:
    value = fields.obj.get("backoff")
    if value is None or value == DEFAULT_BACKOFF:
        return DEFAULT_DELAYS_S
    if isinstance(value, list):
        return _delay_list(fields, value)
    if isinstance(value, dict):
        return _exponential(fields.nested("backoff"))
    fields.fail("backoff", _BACKOFF_HINT)
    return DEFAULT_DELAYS_S


def _delay_list(fields: FieldReader, values: list[object]) -> Backoff:
    if not 1 <= len(values) <= MAX_BACKOFF_ENTRIES:
        fields.fail(
            "backoff",
            f"has {len(values)} delays; give 1 to {MAX_BACKOFF_ENTRIES} (the last one repeats)",
        )
        return DEFAULT_DELAYS_S
    delays: list[int] = []
    for index, value in enumerate(values):
        delay = _whole(value)
        if delay is None or not 1 <= delay <= MAX_BACKOFF_SECONDS:
            fields.fail(
                f"backoff[{index}]",
                f"is {json.dumps(value)}; a delay is a whole number of seconds from 1 to"
                f" {MAX_BACKOFF_SECONDS}",
            )
        else:
            delays.append(delay)
    return tuple(delays) if len(delays) == len(values) else DEFAULT_DELAYS_S


def _exponential(fields: FieldReader) -> Backoff:
    fields.unknown(_EXPONENTIAL_FIELDS)
    for key in _EXPONENTIAL_FIELDS:
        if not fields.given(key):
            fields.fail(key, "is required in an exponential backoff")
    initial = fields.integer("initial", default=1, low=1, high=MAX_BACKOFF_SECONDS, unit="seconds")
    cap = fields.integer("max", default=initial, low=1, high=MAX_BACKOFF_SECONDS, unit="seconds")
    factor = fields.obj.get("factor")
    if factor is not None and not (
        isinstance(factor, int | float)
        and not isinstance(factor, bool)
        and math.isfinite(factor)
        and 1 <= factor <= MAX_BACKOFF_FACTOR
    ):
        fields.fail("factor", f"must be a number from 1 to {MAX_BACKOFF_FACTOR:g}")
    if fields.ok("initial") and fields.ok("max") and cap < initial:
        fields.fail("max", f"is {cap}; it must be at least initial ({initial})")
    if any(not fields.ok(key) for key in _EXPONENTIAL_FIELDS):
        return DEFAULT_DELAYS_S
    assert isinstance(factor, int | float)  # checked above
    return ExponentialBackoff(initial_s=initial, factor=float(factor), max_s=cap)


def _statuses(fields: FieldReader, key: str) -> frozenset[int] | None:
    values = fields.obj.get(key)
    if values is None:
        return None
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_STATUS_ENTRIES:
        fields.fail(
            key, f"must be a list of 1 to {MAX_STATUS_ENTRIES} HTTP status codes, e.g. [400, 422]"
        )
        return None
    codes: set[int] = set()
    for index, value in enumerate(values):
        code = _whole(value)
        problem = _status_problem(code, retried=key == "retry_on_status")
        if problem:
            fields.fail(f"{key}[{index}]", f"is {json.dumps(value)}; {problem}")
        elif code is not None:
            codes.add(code)
    return frozenset(codes)


def _status_problem(code: int | None, *, retried: bool) -> str | None:
    if code is None or not 100 <= code <= 599:
        return "a status code is a whole number from 100 to 599"
    if 200 <= code <= 299:
        return "a 2xx answer is a success and is never retried"
    if retried and code == 410:
        return "410 Gone always fails the run and pauses the schedule"
    return None


def _whole(value: object) -> int | None:
    """A JSON whole number (``30.0`` is 30; ``true`` is not a number)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def retry_document(policy: RetryPolicy) -> dict[str, object]:
    """The tenant-facing ``retry`` object: every key but the status list not in use."""
    document: dict[str, object] = {
        "max_attempts": policy.max_attempts,
        "backoff": backoff_document(policy.backoff),
        "max_age_seconds": policy.window_ms // SECOND_MS,
    }
    if policy.retry_on_status is not None:
        document["retry_on_status"] = sorted(policy.retry_on_status)
    if policy.non_retryable_status:
        document["non_retryable_status"] = sorted(policy.non_retryable_status)
    return document


def backoff_document(backoff: Backoff) -> object:
    if isinstance(backoff, ExponentialBackoff):
        return {"initial": backoff.initial_s, "factor": backoff.factor, "max": backoff.max_s}
    return DEFAULT_BACKOFF if backoff == DEFAULT_DELAYS_S else list(backoff)


def stored_retry(policy: RetryPolicy) -> str | None:
    """The ``retry_policy`` column: the document without ``max_attempts`` (a column of its
    own), compact; None when the rest is ADR 0032's default."""
    rest = retry_document(policy)
    del rest["max_attempts"]
    if rest == _DEFAULT_REST:
        return None
    return json.dumps(rest, separators=(",", ":"), sort_keys=True)


@lru_cache(maxsize=1024)
def stored_policy(max_attempts: int, stored: str | None) -> RetryPolicy:
    """The policy of a schedule row (its ``max_attempts`` and ``retry_policy`` columns).
    Cached: every claim reads one per run, and most schedules share a handful."""
    document = {} if stored is None else json.loads(stored)
    fields = FieldReader({**document, "max_attempts": max_attempts}, prefix="retry.")
    policy = read_retry(fields)
    if fields.errors:  # the row was validated when written
        raise ValueError(f"stored retry policy no longer valid: {fields.errors}")
    return policy


_DEFAULT_REST: Final = {"backoff": DEFAULT_BACKOFF, "max_age_seconds": MAX_AGE_SECONDS}


def merge_retry(stored: object, patch: dict[str, object]) -> dict[str, object]:
    """A merge patch of ``retry``: key by key (``null`` removes a key); ``backoff`` is
    replaced whole, and giving one status list drops the stored other."""
    merged = dict(stored) if isinstance(stored, dict) else {}
    for given, other in (STATUS_FIELDS, tuple(reversed(STATUS_FIELDS))):
        if patch.get(given) is not None and patch.get(other) is None:
            merged.pop(other, None)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged
