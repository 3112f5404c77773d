"""The dedupe test: one real delivery sent twice under the same key, so a tenant can see
what their receiver answers to a duplicate before trusting it (docs/receiver.md, "Resend,
curl and the dedupe test").

Rules this module guards:

- **Its key can never be a real run's.** Its ``X-Scheduled-For`` is a second of the year
  9999, which no occurrence has (occurrences end before :data:`appliance.core.cron.END_MS`)
  and no trigger or resend copy can take (they take seconds up to now), chosen by the
  test's own second (:func:`probe_instant`); key and ``X-Run-Id`` derive from it as for any
  run (ADR 0037), so the receiver helper verifies it, and a receiver that records the key
  can never drop a real delivery because of a test. No run row exists behind it.
- Both requests are marked ``X-Steeple-Test: dedupe``, are signed afresh like two attempts
  of one run (``X-Attempt`` 1, then 2), and carry the schedule's body and headers.
- The verdict (:func:`verdict`) reads only the statuses: a receiver must answer a
  duplicate with a 2xx, or Steeple retries it; whether the *effect* happened once only the
  tenant can see.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from appliance.core.cron import END_MS
from appliance.core.instants import format_scheduled_for

TEST_MARK: Final = "dedupe"  # the X-Steeple-Test value
_SPAN_S: Final = 365 * 86_400  # 9999 is no leap year: its seconds, from END_MS on
EXCERPT_CHARS: Final = 500  # of each answer, in the event


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeAnswer:
    """What one request of the test got: a status (any) or why there was none."""

    status: int | None
    excerpt: str
    error: str | None
    latency_ms: int


class Verdict(enum.StrEnum):
    DUPLICATE_ACCEPTED = "duplicate_accepted"  # 2xx twice: check the effect happened once
    DUPLICATE_REFUSED = "duplicate_refused"  # 2xx, then not: Steeple would retry it
    FIRST_FAILED = "first_failed"  # the first request was not accepted at all


def probe_instant(now_ms: int) -> int:
    """The test's ``scheduled_for``: a second of the year 9999 picked by the test's
    second (so two tests in different seconds within a year never share a key)."""
    return END_MS + (now_ms // 1000 % _SPAN_S) * 1000


def probe_scheduled_for(now_ms: int) -> str:
    return format_scheduled_for(probe_instant(now_ms))


def verdict(first: ProbeAnswer, second: ProbeAnswer) -> Verdict:
    if not _accepted(first):
        return Verdict.FIRST_FAILED
    return Verdict.DUPLICATE_ACCEPTED if _accepted(second) else Verdict.DUPLICATE_REFUSED


def _accepted(answer: ProbeAnswer) -> bool:
    return answer.status is not None and 200 <= answer.status <= 299


def event_data(
    *, key: str, scheduled_for: str, first: ProbeAnswer, second: ProbeAnswer
) -> dict[str, str | int | None]:
    """The ``schedule.dedupe_tested`` event's data (contracts/events)."""
    data: dict[str, str | int | None] = {
        "test": TEST_MARK,
        "idempotency_key": key,
        "scheduled_for": scheduled_for,
        "verdict": verdict(first, second).value,
    }
    for label, answer in (("first", first), ("second", second)):
        data[f"{label}_status"] = answer.status
        data[f"{label}_excerpt"] = answer.excerpt[:EXCERPT_CHARS]
        data[f"{label}_error"] = answer.error
    return data
