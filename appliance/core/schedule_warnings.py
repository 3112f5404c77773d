"""The schedule linter: warnings (never errors) about a timing that is valid but probably
not what its author meant. The create and update answers and the preview carry them
(docs/schedules.md, "Warnings"); each has a stable ``code`` a client may match on and a
``message`` for people.

Codes (the OpenAPI file lists them as an enum):

- ``dom_dow_both``: both day fields are given, so ADR 0037's day rule decides how they
  combine (either matches when both are restricted; both must match when one starts
  with ``*``); the message says which.
- ``day_skips_months``: a day of month from 29 to 31 that some allowed months lack (day
  31 in April, day 29 in February outside leap years): those months have no such day.
- ``time_in_dst_gap``: a fixed-time cron names a local time that does not exist on a
  spring-forward day of its zone within the next year; the message says what the
  schedule's DST policy does then (ADR 0037, ADR 0043).
- ``time_in_dst_fold``: a fixed-time cron names a local time that happens twice on a
  fall-back day of its zone within the next year; the message says at which of the two
  instants (or both) the schedule's DST policy runs it. The gap and fold warnings come
  soonest transition first, the others in code order.
- ``no_fire_within_year``: no occurrence within the next year (or none at all).
- ``jitter_exceeds_period``: ``jitter_seconds`` is at least the time between two
  occurrences, so each delay is capped below the next occurrence (ADR 0037) and the
  spread is narrower than asked.

CPU-bounded whatever the spec: one parse, at most :data:`GAP_SAMPLES` occurrences and
none past the coming year, one croniter step per DST transition of that year, one offset
scan of it (``core.dst.gaps_between``, ``folds_between``), and the first occurrence after
now (croniter's own search is bounded, ``core.cron``): the most for the sparsest spec
(``0 0 29 2 */7``, next in 2032; bench/HISTORY.md, "Costs once quoted in code
comments"). Pure: ``now`` is given.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Sized
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeVar
from zoneinfo import ZoneInfo

from appliance.core.cron import CronSpec, day_rule, first_wall_from, is_fixed_time
from appliance.core.cron_fields import field_values
from appliance.core.cron_words import MONTH_NAMES
from appliance.core.dst import Fold, Gap, ZoneFold, ZoneGap, folds_between, gaps_between
from appliance.core.instants import format_instant
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.timing import ScheduleKind, Timing, kind_of, occurrences

YEAR_MS: Final = 366 * 86_400_000
GAP_SAMPLES: Final = 32  # occurrences examined for the shortest gap between two
_Span = TypeVar("_Span", ZoneGap, ZoneFold)
_DAYS_IN_MONTH: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February: 28


class WarningCode(enum.StrEnum):
    DOM_DOW_BOTH = "dom_dow_both"
    DAY_SKIPS_MONTHS = "day_skips_months"
    TIME_IN_DST_GAP = "time_in_dst_gap"
    TIME_IN_DST_FOLD = "time_in_dst_fold"
    NO_FIRE_WITHIN_YEAR = "no_fire_within_year"
    JITTER_EXCEEDS_PERIOD = "jitter_exceeds_period"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleWarning:
    code: WarningCode
    message: str


def schedule_warnings(timing: Timing, *, jitter_seconds: int, now: int) -> list[ScheduleWarning]:
    """The warnings about a valid timing (and its jitter) as of ``now``, in code order
    (the two DST warnings by date)."""
    found: list[ScheduleWarning] = []
    shared = OccurrenceCache(max_specs=1)  # the spec is parsed once, for every check
    if kind_of(timing) is ScheduleKind.CRON:
        spec = shared.spec(timing.cron, timing.timezone, timing.dst_gap, timing.dst_fold)
        found.extend(_day_rule(spec))
        found.extend(_short_months(spec))
        found.extend(_dst(spec, timing, now))
    found.extend(_no_fire(timing, now))
    found.extend(_jitter(timing, jitter_seconds, now, shared))
    return found


def warning_documents(warnings: list[ScheduleWarning]) -> list[dict[str, str]]:
    """The JSON form: ``[{"code": …, "message": …}]``."""
    return [{"code": w.code.value, "message": w.message} for w in warnings]


def _day_rule(spec: CronSpec) -> list[ScheduleWarning]:
    rule = day_rule(spec)
    if rule is None:
        return []
    return [
        ScheduleWarning(
            code=WarningCode.DOM_DOW_BOTH,
            message=f"day of month and day of week are both given; {rule}",
        )
    ]


def _short_months(spec: CronSpec) -> list[ScheduleWarning]:
    return list(_short_months_of(spec.expression))


@functools.lru_cache(maxsize=1024)
def _short_months_of(expression: str) -> tuple[ScheduleWarning, ...]:
    """Kept per expression (the answer depends on it alone): reading its fields again
    cost every create worker-thread CPU (bench/HISTORY.md, "Costs once quoted in code
    comments"), and most creates repeat a few crons."""
    return tuple(_month_warnings(expression))


def _month_warnings(expression: str) -> list[ScheduleWarning]:
    day_text = expression.split()[-3] if not expression.startswith("@") else "*"
    if day_text.startswith("*"):
        return []  # every day, or a step: the author asked for whatever days exist
    _, _, days, months, _ = field_values(expression)
    parts = []
    for day in sorted(d for d in days if d >= 29):
        lacking = [m for m in sorted(months) if day > _DAYS_IN_MONTH[m - 1]]
        if lacking == [2] and day == 29:
            parts.append("day 29 exists in February only in leap years, so it fires then only")
        elif lacking:
            names = _and([MONTH_NAMES[m - 1] for m in lacking])
            parts.append(f"day {day} does not exist in {names}, so it never fires then")
    if not parts:
        return []
    message = "; ".join(parts)
    return [ScheduleWarning(code=WarningCode.DAY_SKIPS_MONTHS, message=message)]


def _dst(spec: CronSpec, timing: Timing, now: int) -> list[ScheduleWarning]:
    """The gap and the fold warnings, soonest transition first: in October the fold days
    away says more than next March's gap (ADR 0043)."""
    if not is_fixed_time(spec):
        return []  # a wildcard spec fires at the real instants that match: nothing to say
    start = now if timing.start_at is None else max(now, timing.start_at)
    end = now + YEAR_MS if timing.end_at is None else min(now + YEAR_MS, timing.end_at)
    zone = ZoneInfo(spec.timezone)
    found = [
        *_gap_warning(spec, _hits(spec, gaps_between(zone, start, end))),
        *_fold_warning(spec, _hits(spec, folds_between(zone, start, end))),
    ]
    return [warning for _, warning in sorted(found, key=lambda pair: pair[0])]


def _hits(spec: CronSpec, spans: list[_Span]) -> list[tuple[_Span, datetime]]:
    """Each transition whose affected wall times the spec names, with the first such."""
    hits = []
    for span in spans:
        wall = first_wall_from(spec, span.wall_start)
        if wall is not None and wall < span.wall_end:
            hits.append((span, wall))
    return hits


def _gap_warning(
    spec: CronSpec, hits: list[tuple[ZoneGap, datetime]]
) -> list[tuple[int, ScheduleWarning]]:
    if not hits:
        return []
    gap, wall = hits[0]
    what = (
        f"runs at {gap.wall_end:%H:%M} instead (dst.gap: shift)"
        if spec.dst.gap is Gap.SHIFT
        else "does not run that day (dst.gap: skip)"
    )
    message = (
        f"{_clock(wall)} does not exist on {wall:%Y-%m-%d} in {spec.timezone} (clocks jump "
        f"from {gap.wall_start:%H:%M} to {gap.wall_end:%H:%M}): the schedule {what}"
        f"{_more(hits)}"
    )
    return [(gap.end_ms, ScheduleWarning(code=WarningCode.TIME_IN_DST_GAP, message=message))]


def _fold_warning(
    spec: CronSpec, hits: list[tuple[ZoneFold, datetime]]
) -> list[tuple[int, ScheduleWarning]]:
    if not hits:
        return []
    fold, wall = hits[0]
    clock = _clock(wall)
    what = {
        Fold.FIRST: f"runs once, at the first {clock} ({fold.first_name}) (dst.fold: first)",
        Fold.LAST: f"runs once, at the second {clock} ({fold.second_name}) (dst.fold: last)",
        Fold.BOTH: (
            f"runs twice, at {clock} {fold.first_name} and at {clock} {fold.second_name}"
            " (dst.fold: both)"
        ),
    }[spec.dst.fold]
    message = (
        f"{clock} happens twice on {wall:%Y-%m-%d} in {spec.timezone} (clocks go back "
        f"from {fold.wall_end:%H:%M} to {fold.wall_start:%H:%M}): the schedule {what}"
        f"{_more(hits)}"
    )
    return [(fold.start_ms, ScheduleWarning(code=WarningCode.TIME_IN_DST_FOLD, message=message))]


def _clock(wall: datetime) -> str:
    return f"{wall:%H:%M}" + (f":{wall:%S}" if wall.second else "")


def _more(hits: Sized) -> str:
    return f" ({len(hits) - 1} more such day(s) within the next year)" if len(hits) > 1 else ""


def _no_fire(timing: Timing, now: int) -> list[ScheduleWarning]:
    # One step of its own: the cache would compute a chunk of occurrences for this one.
    first = next(occurrences(timing, after_ms=now), None)
    if first is not None and first <= now + YEAR_MS:
        return []
    message = (
        "the schedule never fires after now"
        if first is None
        else f"the schedule first fires at {format_instant(first)}, more than a year from now"
    )
    return [ScheduleWarning(code=WarningCode.NO_FIRE_WITHIN_YEAR, message=message)]


def _jitter(
    timing: Timing, jitter_seconds: int, now: int, shared: OccurrenceCache
) -> list[ScheduleWarning]:
    if jitter_seconds == 0:
        return []
    if timing.every_seconds is not None:
        shortest = timing.every_seconds * 1000
    else:
        # Within the coming year only: a sparse spec's steps are the costly ones, and its
        # occurrences are far more than an hour (the longest jitter) apart anyway.
        coming = itertools.takewhile(
            lambda ms: ms <= now + YEAR_MS, occurrences(timing, after_ms=now, shared=shared)
        )
        sample = list(itertools.islice(coming, GAP_SAMPLES))
        gaps = [b - a for a, b in itertools.pairwise(sample)]
        if not gaps:
            return []
        shortest = min(gaps)
    if jitter_seconds * 1000 < shortest:
        return []
    message = (
        f"jitter_seconds ({jitter_seconds}) is at least the time between two occurrences "
        f"({shortest // 1000} s): each run's delay is capped just below the next occurrence, "
        "so runs spread over less than the jitter asked for"
    )
    return [ScheduleWarning(code=WarningCode.JITTER_EXCEEDS_PERIOD, message=message)]


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
