"""A schedule's daylight-saving policy, and where a zone's clocks jump (ADR 0043).

- ``dst: {"gap": "shift" | "skip", "fold": "first" | "last" | "both"}`` on a cron
  schedule. A key left out (or no ``dst`` at all) takes ADR 0037's rule for the spec's
  class: a **fixed-time** spec shifts a gap time to the gap's end and fires a fold time at
  its first instant; a **wildcard** spec skips gap times and fires fold times at both
  instants. So a schedule without ``dst`` plans exactly what it always planned.
- ``gap``: a wall time that does not exist (spring forward) fires once at the first
  instant after the gap (``shift``) or not at all (``skip``).
- ``fold``: a wall time that happens twice (fall back) fires at its earlier instant
  (``first``), its later one (``last``) or both (``both``).
- Whatever the policy, occurrences stay strictly increasing: two wall times landing on one
  instant (gap times shifted onto the gap's end) fire once (``core.cron``).
- A preview marks each occurrence a transition touched (:class:`DstMark`).
- :func:`gaps_between` and :func:`folds_between` find a zone's spring-forward gaps and
  fall-back folds in a bounded span by sampling the offset every few hours and bisecting
  each change (≈ 1,500 offset look-ups a year), for the schedule linter: each (zone,
  year) is scanned once and kept, since every create of a fixed-time cron asks for the
  coming year. In the southern hemisphere the gap falls in September or October and the
  fold in March or April: which is which follows from the offset's direction alone.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo

from appliance.errors import FieldError

# No zone changes its offset twice within this many seconds (the shortest spell between
# two transitions in tzdata is weeks), so sampling this often misses none.
_SAMPLE_S: Final = 6 * 3600
_CACHED_ZONE_YEARS: Final = 1024  # (zone, year) pairs, a few gaps each
_LAST_S: Final = 253_402_300_799  # 9999-12-31T23:59:59Z


class Gap(enum.StrEnum):
    SHIFT = "shift"  # a wall time in a gap fires at the gap's end
    SKIP = "skip"  # a wall time in a gap does not fire


class Fold(enum.StrEnum):
    FIRST = "first"  # a wall time in a fold fires at its earlier instant
    LAST = "last"  # ... at its later instant
    BOTH = "both"  # ... at both


class DstMark(enum.StrEnum):
    """What a transition did to a previewed occurrence."""

    GAP_SHIFTED = "gap_shifted"  # a wall time inside a gap, moved to the gap's end
    FOLD_FIRST = "fold_first"  # the earlier instant of a wall time that happens twice
    FOLD_LAST = "fold_last"  # the later instant of a wall time that happens twice


@dataclass(frozen=True, slots=True)
class DstPolicy:
    gap: Gap
    fold: Fold


FIXED_TIME_DEFAULT: Final = DstPolicy(Gap.SHIFT, Fold.FIRST)
WILDCARD_DEFAULT: Final = DstPolicy(Gap.SKIP, Fold.BOTH)


def resolve_policy(gap: str | None, fold: str | None, *, wildcard: bool) -> DstPolicy:
    """The policy in force: each key given, else ADR 0037's rule for the spec's class.
    ValueError for a value that is not a policy (stored values were validated)."""
    default = WILDCARD_DEFAULT if wildcard else FIXED_TIME_DEFAULT
    return DstPolicy(
        default.gap if gap is None else Gap(gap),
        default.fold if fold is None else Fold(fold),
    )


def check_policy(value: object) -> tuple[str | None, str | None, list[FieldError]]:
    """``(gap, fold, problems)`` of a tenant's ``dst`` object (None: absent)."""
    if value is None:
        return None, None, []
    if not isinstance(value, dict):
        return None, None, [FieldError(field="dst", message=_DST_EXAMPLE)]
    problems = [
        FieldError(field=f"dst.{key}", message="is not a known field; the fields are: gap, fold")
        for key in value
        if key not in ("gap", "fold")
    ]
    found: list[str | None] = []
    for key, choices in (("gap", Gap), ("fold", Fold)):
        given = value.get(key)
        if given is None or (isinstance(given, str) and given in {c.value for c in choices}):
            found.append(given)
            continue
        found.append(None)
        names = " or ".join(f'"{c.value}"' for c in choices)
        problems.append(FieldError(field=f"dst.{key}", message=f"must be {names}"))
    return found[0], found[1], problems


_DST_EXAMPLE: Final = (
    'must be an object such as {"gap": "shift", "fold": "first"} (gap: shift or skip; '
    "fold: first, last or both)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ZoneGap:
    """A spring-forward gap: wall times from ``wall_start`` (inclusive) to ``wall_end``
    (exclusive) do not exist; ``end_ms`` is the instant the clocks jump."""

    end_ms: int
    wall_start: datetime  # naive local wall-clock time
    wall_end: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ZoneFold:
    """A fall-back fold: wall times from ``wall_start`` (inclusive) to ``wall_end``
    (exclusive) happen twice, first before ``start_ms`` (the instant the clocks go back,
    abbreviation ``first_name``) and again after it (``second_name``)."""

    start_ms: int
    wall_start: datetime  # naive local wall-clock time
    wall_end: datetime
    first_name: str  # "CEST": the zone's abbreviation at the earlier instants
    second_name: str  # "CET": ... at the later instants


Transition = ZoneGap | ZoneFold


def gaps_between(zone: ZoneInfo, start_ms: int, end_ms: int) -> list[ZoneGap]:
    """Every gap of ``zone`` whose jump lies in ``(start_ms, end_ms]``, in order: those of
    each calendar year (UTC) the span touches, scanned once per zone and year."""
    return [t for t in _transitions_between(zone, start_ms, end_ms) if isinstance(t, ZoneGap)]


def folds_between(zone: ZoneInfo, start_ms: int, end_ms: int) -> list[ZoneFold]:
    """Every fold of ``zone`` whose clocks go back in ``(start_ms, end_ms]``, in order, as
    :func:`gaps_between` finds gaps."""
    return [t for t in _transitions_between(zone, start_ms, end_ms) if isinstance(t, ZoneFold)]


def _transitions_between(zone: ZoneInfo, start_ms: int, end_ms: int) -> list[Transition]:
    first, last = (datetime.fromtimestamp(ms // 1000, tz=UTC).year for ms in (start_ms, end_ms))
    return [
        found
        for year in range(first, last + 1)
        for found in _transitions_in_year(zone, year)
        if start_ms < _instant(found) <= end_ms
    ]


@lru_cache(maxsize=_CACHED_ZONE_YEARS)  # thread-safe; ZoneInfo(name) is one object per name
def _transitions_in_year(zone: ZoneInfo, year: int) -> tuple[Transition, ...]:
    start = datetime(year, 1, 1, tzinfo=UTC).timestamp()
    end = datetime(year + 1, 1, 1, tzinfo=UTC).timestamp() if year < 9999 else _LAST_S
    return tuple(scan_transitions(zone, int(start) * 1000, int(end) * 1000))


def scan_gaps(zone: ZoneInfo, start_ms: int, end_ms: int) -> list[ZoneGap]:
    """:func:`gaps_between`, worked out: ≈ 1,500 offset look-ups a year."""
    return [t for t in scan_transitions(zone, start_ms, end_ms) if isinstance(t, ZoneGap)]


def scan_transitions(zone: ZoneInfo, start_ms: int, end_ms: int) -> list[Transition]:
    """Every offset change of ``zone`` in ``(start_ms, end_ms]``: a gap when the offset
    grows, a fold when it shrinks, in order."""
    found: list[Transition] = []
    low = start_ms // 1000
    high_end = end_ms // 1000
    low_offset = offset_at(low, zone)
    while low < high_end:
        high = min(low + _SAMPLE_S, high_end)
        high_offset = offset_at(high, zone)
        if high_offset != low_offset:
            jump = first_with_offset(low, high, zone, high_offset)
            found.append(_transition(zone, jump, low_offset, high_offset))
        low, low_offset = high, high_offset
    return found


def _transition(zone: ZoneInfo, jump: int, before: int, after: int) -> Transition:
    if after > before:
        return ZoneGap(
            end_ms=jump * 1000, wall_start=_wall(jump + before), wall_end=_wall(jump + after)
        )
    return ZoneFold(
        start_ms=jump * 1000,
        wall_start=_wall(jump + after),
        wall_end=_wall(jump + before),
        first_name=_abbreviation(jump - 1, zone),
        second_name=_abbreviation(jump, zone),
    )


def _instant(transition: Transition) -> int:
    return transition.end_ms if isinstance(transition, ZoneGap) else transition.start_ms


def _abbreviation(epoch_s: int, zone: ZoneInfo) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).astimezone(zone).tzname() or ""


def first_with_offset(low: int, high: int, zone: ZoneInfo, target: int) -> int:
    """The first epoch second in ``(low, high]`` with the UTC offset ``target`` (seconds),
    by bisection: ``high`` must have it, and the offset changes once in between."""
    while high - low > 1:
        middle = (low + high) // 2
        if offset_at(middle, zone) == target:
            high = middle
        else:
            low = middle
    return high


def offset_at(epoch_s: int, zone: ZoneInfo) -> int:
    """``zone``'s UTC offset at an epoch second, in seconds."""
    offset = datetime.fromtimestamp(epoch_s, tz=UTC).astimezone(zone).utcoffset()
    assert offset is not None  # ZoneInfo always knows its offset
    return offset.days * 86_400 + offset.seconds


def _wall(local_s: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(seconds=local_s)  # noqa: DTZ001 - wall-clock time
