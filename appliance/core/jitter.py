"""Jitter: when an occurrence is due, as opposed to when it is scheduled (ADR 0037).

- ``J = min(jitter_seconds · 1000, gap − 1)`` where ``gap`` is the distance in ms to the
  *next* nominal occurrence; ``u`` = the first 8 bytes of SHA-256(``"jitter:" +
  schedule_id + scheduled_for``) read big-endian, divided by 2^64;
  ``jitter_ms = floor(u · J)`` (computed in integers, so exact).
- So ``0 ≤ jitter_ms < J`` whenever ``J > 0``: a run is never due before its nominal time,
  never later than its window allows, and never at or after the next occurrence.
  ``jitter_seconds = 0`` gives ``due_at == scheduled_for``.
- Deterministic: the same schedule and occurrence always get the same jitter, so a
  re-plan or a restore reproduces ``due_at``. It is stored at materialisation anyway.
- ``planned_occurrences`` (a cron spec) and ``planned_timing`` (any kind, core.timing) are
  the functions the planner and the preview both use; both end in :func:`with_jitter`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import NamedTuple

from appliance.core.cron import CronSpec, occurrences_after
from appliance.core.instants import format_scheduled_for
from appliance.core.occurrence_cache import Occurrences
from appliance.core.timing import Timing, occurrences


class PlannedOccurrence(NamedTuple):
    """A named tuple rather than a frozen dataclass: the planner makes one per occurrence
    per schedule, and the dataclass cost three times as much to build."""

    scheduled_for: int  # nominal instant, epoch ms (whole seconds): identity and key
    due_at: int  # scheduled_for + jitter, epoch ms: when the run may be claimed


def jitter_ms(schedule_id: str, scheduled_for_ms: int, jitter_seconds: int, gap_ms: int) -> int:
    """The delay (ms) added to ``scheduled_for_ms``; ``gap_ms`` is the distance to the next
    nominal occurrence (≥ 1)."""
    if jitter_seconds < 0 or gap_ms < 1:
        raise ValueError(f"jitter_seconds must be ≥ 0 and gap_ms ≥ 1: {jitter_seconds}, {gap_ms}")
    window = min(jitter_seconds * 1000, gap_ms - 1)
    if window == 0:
        return 0
    text = "jitter:" + schedule_id + format_scheduled_for(scheduled_for_ms)
    unit = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    return (unit * window) >> 64  # floor(unit / 2**64 * window), exactly


def planned_occurrences(
    spec: CronSpec,
    *,
    schedule_id: str,
    jitter_seconds: int,
    after_ms: int,
    shared: Occurrences | None = None,
) -> Iterator[PlannedOccurrence]:
    """Every occurrence of ``spec`` after ``after_ms`` with its ``due_at``, in order.
    ``shared``: the caller's cache, so schedules with the same spec compute them once."""
    nominal = occurrences_after(spec, after_ms) if shared is None else shared.after(spec, after_ms)
    return with_jitter(nominal, schedule_id=schedule_id, jitter_seconds=jitter_seconds)


def planned_timing(
    timing: Timing,
    *,
    schedule_id: str,
    jitter_seconds: int,
    after_ms: int,
    shared: Occurrences | None = None,
) -> Iterator[PlannedOccurrence]:
    """Every occurrence of a schedule of any kind after ``after_ms``, with its ``due_at``.
    The last occurrence of a bounded or one-off schedule has no successor: its jitter
    window is the whole ``jitter_seconds``."""
    nominal = occurrences(timing, after_ms=after_ms, shared=shared)
    return with_jitter(nominal, schedule_id=schedule_id, jitter_seconds=jitter_seconds)


def with_jitter(
    nominal: Iterator[int], *, schedule_id: str, jitter_seconds: int
) -> Iterator[PlannedOccurrence]:
    """The nominal instants of one schedule, in order, each with its ``due_at``."""
    if jitter_seconds == 0:  # no jitter: no need to look ahead
        for scheduled_for in nominal:
            yield PlannedOccurrence(scheduled_for, scheduled_for)
        return
    current = next(nominal, None)
    while current is not None:
        following = next(nominal, None)
        # The last occurrence before year 9999 has no successor: its window is unbounded.
        gap = following - current if following is not None else jitter_seconds * 1000 + 1
        delay = jitter_ms(schedule_id, current, jitter_seconds, gap)
        yield PlannedOccurrence(current, current + delay)
        current = following
