"""When a schedule fires: its kind (cron, a one-off, an interval) and its bounds.

Rules this module guards (docs/schedules.md; identity and jitter are ADR 0037's):

- A schedule has exactly one kind. ``cron``: an expression matched in an IANA timezone
  (``core.cron``, with ADR 0037's DST rules, or the schedule's ``dst`` policy of ADR
  0043). ``at``: a one-off, exactly one occurrence. ``every``: an interval, occurrences
  ``anchor + k · period`` for k ≥ 0 counted in UTC, so daylight saving time never moves
  them (nor may they carry a ``dst`` policy); the anchor is ``start_at``.
- ``start_at`` and ``end_at`` bound every kind, both inclusive: nothing before
  ``start_at`` or after ``end_at`` is ever planned.
- Every kind keeps ``core.cron``'s promises, so the planner, jitter, the run identity and
  the unique index treat all kinds alike: occurrences are whole seconds, strictly
  increasing, each after the ``after_ms`` asked for, all before :data:`END_MS`.
- An interval's anchor never moves once stored: the store sets ``start_at`` (the
  creation instant, rounded down to the second, :func:`default_anchor`) when the tenant
  gives none, and the schedule shows it.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Iterator
from typing import Final, Protocol

from appliance.core.cron import END_MS, CronSpec, occurrences_after, parse_cron
from appliance.core.occurrence_cache import Occurrences

MAX_EVERY_SECONDS: Final = 366 * 24 * 3600
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_EVERY: Final = re.compile(r"([1-9][0-9]{0,8})([smhd])")


class ScheduleKind(enum.StrEnum):
    CRON = "cron"
    AT = "at"
    EVERY = "every"


class Timing(Protocol):
    """The timing fields of a schedule: ``ScheduleSpec`` and the planner's ``DueSchedule``
    both have them. ``cron`` is '' unless the kind is cron; instants are epoch ms."""

    @property
    def cron(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def at(self) -> int | None: ...
    @property
    def every_seconds(self) -> int | None: ...
    @property
    def start_at(self) -> int | None: ...
    @property
    def end_at(self) -> int | None: ...
    @property
    def dst_gap(self) -> str | None: ...  # a cron's DST policy (core.dst); None: ADR 0037
    @property
    def dst_fold(self) -> str | None: ...


def kind_of(timing: Timing) -> ScheduleKind:
    if timing.at is not None:
        return ScheduleKind.AT
    if timing.every_seconds is not None:
        return ScheduleKind.EVERY
    return ScheduleKind.CRON


def is_plain_cron(timing: Timing) -> bool:
    """A cron schedule without bounds or DST policy: what every schedule was before kinds
    existed."""
    return (
        timing.at is None
        and timing.every_seconds is None
        and timing.start_at is None
        and timing.end_at is None
        and timing.dst_gap is None
        and timing.dst_fold is None
    )


def default_anchor(now: int) -> int:
    """The anchor of an interval created at ``now`` without ``start_at``: its second."""
    return now - now % 1000


def parse_every(text: str) -> int:
    """Seconds of an interval written ``90s``, ``15m``, ``2h`` or ``1d``; ValueError with a
    readable message otherwise."""
    match = _EVERY.fullmatch(text)
    if match is None:
        raise ValueError(
            'must be a whole number and a unit, s, m, h or d, e.g. "90s", "15m" or "2h"'
        )
    return int(match.group(1)) * _UNITS[match.group(2)]


def format_every(seconds: int) -> str:
    """The shortest text :func:`parse_every` reads back as ``seconds``."""
    for unit, size in reversed(_UNITS.items()):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    raise AssertionError("every whole number of seconds has a unit")  # pragma: no cover


def occurrences(
    timing: Timing, *, after_ms: int, shared: Occurrences | None = None
) -> Iterator[int]:
    """Every occurrence of ``timing`` after ``after_ms``, in order. ``shared``: the caller's
    occurrence cache for cron kinds. Raises ValidationError for a cron that no longer
    parses, ValueError for an interval without its anchor."""
    start = after_ms if timing.start_at is None else max(after_ms, timing.start_at - 1)
    stream: Iterator[int]
    if timing.at is not None:
        stream = iter((timing.at,) if timing.at > start else ())
    elif timing.every_seconds is not None:
        if timing.start_at is None:
            raise ValueError("an interval needs its anchor (start_at)")
        stream = _every(timing.start_at, timing.every_seconds * 1000, start)
    elif shared is None:
        stream = occurrences_after(cron_spec(timing), start)
    else:
        spec = shared.spec(timing.cron, timing.timezone, timing.dst_gap, timing.dst_fold)
        stream = shared.after(spec, start)
    if timing.end_at is not None:
        end_at = timing.end_at
        stream = itertools.takewhile(lambda ms: ms <= end_at, stream)
    return stream


def cron_spec(timing: Timing) -> CronSpec:
    """The parsed cron of a cron-kind timing, with its DST policy; ValidationError."""
    return parse_cron(
        timing.cron, timing.timezone, dst_gap=timing.dst_gap, dst_fold=timing.dst_fold
    )


def first_after(timing: Timing, now: int) -> int | None:
    """The first occurrence strictly after ``now``, None if there is none."""
    return next(occurrences(timing, after_ms=now), None)


def previous_occurrence(
    timing: Timing, before_ms: int, *, shared: Occurrences | None = None
) -> int | None:
    """The last occurrence of ``timing`` strictly before ``before_ms``; None when there is
    none (nothing before ``start_at``, a one-off's only occurrence, 1970). Occurrences only
    run forwards, so this looks back in windows ending at ``before_ms``
    (each window is read forwards, its last occurrence before ``before_ms`` wins) and grow
    eightfold until one holds an occurrence."""
    floor = 0 if timing.start_at is None else timing.start_at
    span = 60_000
    while True:
        low = max(before_ms - span, floor)
        last = None
        for ms in occurrences(timing, after_ms=max(low - 1, 0), shared=shared):
            if ms >= before_ms:
                break
            last = ms
        if last is not None or low <= floor:
            return last
        span *= 8


def _every(anchor: int, period_ms: int, after_ms: int) -> Iterator[int]:
    steps = 0 if after_ms < anchor else (after_ms - anchor) // period_ms + 1
    return iter(range(anchor + steps * period_ms, END_MS, period_ms))
