"""Cron expressions in time: what a validated expression means in an IANA timezone, and
the occurrences it produces. The grammar (what text is accepted, and the messages) is
``core.cron_fields``'s.

The only module that imports croniter (an import-linter contract says so).

- Days (ADR 0037, "Day of month and day of week"): a day field that *starts with* ``*``
  (``*``, ``*/2``, ``*,10``) is unrestricted. When either day field is unrestricted a day
  must match both (AND: ``0 0 */2 * 1`` is odd days that are Mondays); when both are
  restricted a day matching either fires (OR: ``0 0 1,15 * 5`` is the 1st, the 15th and
  every Friday). This is Vixie cron's rule, which Linux crontabs and crontab.guru follow;
  croniter gives it with ``implement_cron_bug=True`` (its default counts only a bare ``*``).

Occurrences and daylight saving time (ADR 0037):
- Fields are matched against the *local wall-clock time* of the schedule's timezone;
  croniter iterates naive wall-clock times and this module maps each to UTC itself.
- A spec is **wildcard** if its minute or its hour field contains ``*`` (``*``, ``*/n``,
  ``*/n`` inside a list; ``@hourly`` is ``0 * * * *``). Every other spec is **fixed-time**.
  A seconds field never changes the class: it follows the minute field's rule.
- Gap (spring forward), a wall time that does not exist: a fixed-time spec fires once at
  the first instant after the gap (the transition itself: 02:30 → 03:00 local);
  a wildcard spec skips it.
- Fold (fall back), a wall time that happens twice: a fixed-time spec fires at the earlier
  instant only; a wildcard spec fires at both.
- A schedule's ``dst`` policy (``core.dst``, ADR 0043) replaces either rule for its
  spec: ``gap`` ``shift`` or ``skip``, ``fold`` ``first``, ``last`` or ``both``. Without
  one (``parse_cron``'s default) the class decides, as above.
- Output is strictly increasing epoch ms, whole seconds, every value > ``after_ms``; two
  wall times that land on the same instant (a gap time shifted onto the gap's end, which
  is itself an occurrence) fire once. Iteration ends before :data:`END_MS` (the start of
  year 9999 UTC), so every occurrence has an ordinary local time and text form in any zone.
- Size: an expression longer than :data:`MAX_EXPRESSION_CHARS` is refused before anything
  else looks at it (a parse's CPU grows with the spec; see ``parse_cron``).
"""

from __future__ import annotations

import copy
import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache, lru_cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from appliance.core.cron_fields import check_fields
from appliance.core.dst import (
    DstMark,
    DstPolicy,
    Fold,
    Gap,
    first_with_offset,
    offset_at,
    resolve_policy,
)
from appliance.core.instants import to_datetime
from appliance.errors import FieldError, ValidationError

# croniter gives up when it finds no occurrence within this many years. The longest gap
# between two occurrences of any spec is 40 years (29 February on a Sunday, `0 0 29 2 */7`,
# across the skipped leap day of 2100), and a spec that can fire at all fires within 28
# years of 2000 (the calendar's weekdays repeat every 28 years until 2100): so 50 both
# refuses exactly the specs that never fire and never ends a sparse spec's iteration early.
NEVER_FIRES_HORIZON_YEARS = 50
_HORIZON_START = datetime(2000, 1, 1)  # noqa: DTZ001 - naive on purpose: wall-clock time

MAX_EXPRESSION_CHARS = 200
MAX_TIMEZONE_CHARS = 64  # the longest IANA name has 32
# Occurrences end before this instant (9999-01-01T00:00:00Z): later ones could have a local
# time past year 9999, which datetime cannot hold.
END_MS = 253_370_764_800_000

_NAIVE_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - wall-clock seconds, as croniter counts
_SECOND = timedelta(seconds=1)
# Folds are shorter than this (and never follow another transition this closely); it
# bounds how far before `after_ms` lies a wall time whose second instant is after it.
_FOLD_REACH_S = 3 * 3600


@dataclass(frozen=True, slots=True, kw_only=True)
class CronSpec:
    """A validated cron expression in an IANA timezone. Build it with ``parse_cron``."""

    expression: str
    timezone: str
    dst: DstPolicy  # in force: the schedule's, or ADR 0037's rule for the spec's class
    # What decides the occurrences, as plain strings (their hashes are cached): the key of
    # the occurrence cache, looked up once per occurrence.
    identity: tuple[str, str, str, str] = field(repr=False, compare=False)
    _fields: str = field(repr=False, compare=False)  # what croniter iterates (macros expanded)
    _wildcard: bool = field(repr=False, compare=False)
    _zone: ZoneInfo = field(repr=False, compare=False)
    # A croniter over _fields, to be shallow-copied, never iterated itself: expanding an
    # expression costs far more than an occurrence, and croniter never mutates
    # the expanded lists it shares with its copies (it copies them before changing them).
    _walls: Any = field(repr=False, compare=False)


# Valid specs parsed lately, shared by every caller and thread (a CronSpec is immutable
# and its croniter is only ever copied): a create parses its spec up to four times
# (validation, linter, first cursor, next runs), a bulk create thousands of times.
PARSED_SPECS = 1024  # ~3 KB each


def parse_cron(
    expression: str,
    timezone: str = "UTC",
    *,
    dst_gap: str | None = None,
    dst_fold: str | None = None,
) -> CronSpec:
    """Validate ``expression`` and ``timezone``; raise ``ValidationError`` listing every
    problem found (fields ``"cron"`` and ``"timezone"``). ``dst_gap``/``dst_fold``: the
    schedule's DST policy (``core.dst``), None for ADR 0037's rule of the spec's class.
    A parse is milliseconds (the most for a long spec of many ranges: bench/HISTORY.md,
    "Creating schedules"), so the last
    :data:`PARSED_SPECS` valid specs are kept (an invalid one is parsed, and refused, every
    time); callers that also step through occurrences again and again keep them in an
    :class:`~appliance.core.occurrence_cache.OccurrenceCache`."""
    return _parse(expression, timezone, dst_gap, dst_fold)


@lru_cache(maxsize=PARSED_SPECS)  # thread-safe; an exception is never cached
def _parse(expression: str, timezone: str, dst_gap: str | None, dst_fold: str | None) -> CronSpec:
    too_long = [
        FieldError(
            field=name, message=f"is {len(text)} characters long; at most {limit} are allowed"
        )
        for name, text, limit in (
            ("cron", expression, MAX_EXPRESSION_CHARS),
            ("timezone", timezone, MAX_TIMEZONE_CHARS),
        )
        if len(text) > limit
    ]
    if too_long:
        raise ValidationError(too_long)
    fields, problems = check_fields(expression)
    seconds_first = len(fields.split()) == 6
    walls = None
    if not problems:
        walls, problems = _walls(fields, seconds_first=seconds_first)
    errors = [FieldError(field="cron", message=p) for p in problems]
    zone = _zone(timezone)
    if zone is None:
        message = f"unknown IANA timezone {timezone!r}; use a name such as Europe/London or UTC"
        errors.append(FieldError(field="timezone", message=message))
    if errors or zone is None:
        raise ValidationError(errors)
    clock_fields = fields.split()[-5:-3]  # minute and hour, wherever the seconds went
    wildcard = any("*" in token for token in clock_fields)
    policy = resolve_policy(dst_gap, dst_fold, wildcard=wildcard)
    return CronSpec(
        expression=expression,
        timezone=timezone,
        dst=policy,
        identity=(expression, timezone, policy.gap.value, policy.fold.value),
        _fields=fields,
        _wildcard=wildcard,
        _zone=zone,
        _walls=walls,
    )


def is_fixed_time(spec: CronSpec) -> bool:
    """Whether ``spec`` names explicit minutes and hours (ADR 0037's fixed-time class)."""
    return not spec._wildcard


def day_rule(spec: CronSpec) -> str | None:
    """In words, how the two day fields combine, when both are given (neither a bare
    ``*``); None otherwise, when the one given field (or none) decides alone."""
    tokens = spec._fields.split()
    days, weekdays = tokens[-3], tokens[-1]
    if "*" in (days, weekdays):
        return None
    if days.startswith("*") or weekdays.startswith("*"):
        starred = "day of month" if days.startswith("*") else "day of week"
        return (
            f"both: a day fires only if its day of month matches {days} and its day of week "
            f"matches {weekdays} ({starred} starts with *, so the fields combine with AND, "
            "as in Vixie cron and crontab.guru)"
        )
    return (
        f"either: a day fires if its day of month matches {days} or its day of week matches "
        f"{weekdays} (both day fields are restricted, so they combine with OR, as in Vixie "
        "cron and crontab.guru)"
    )


def local_wall_time(ms: int, timezone: str) -> tuple[str, str]:
    """``("2026-03-08T03:00:00", "-04:00")``: the local time of ``ms`` in ``timezone`` and
    the UTC offset in effect, for previews. Milliseconds appear only when not zero."""
    zone = _zone(timezone)
    if zone is None:
        raise ValidationError.single("timezone", f"unknown IANA timezone {timezone!r}")
    local = to_datetime(ms).astimezone(zone)
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if ms % 1000:
        text += f".{ms % 1000:03d}"
    return text, _format_offset(_seconds(local.utcoffset()))


def occurrences_after(spec: CronSpec, after_ms: int) -> Iterator[int]:
    """Every occurrence of ``spec`` after ``after_ms`` and before :data:`END_MS`: strictly
    increasing epoch ms, whole seconds, following the DST rules in this module's
    docstring. ``after_ms`` must be from 0 (1970) to ``END_MS``; ValueError otherwise."""
    if not 0 <= after_ms <= END_MS:
        raise ValueError(f"after_ms must be from 0 to {END_MS}, got {after_ms}")
    return itertools.takewhile(END_MS.__gt__, _occurrences_after(spec, after_ms))


def _occurrences_after(spec: CronSpec, after_ms: int) -> Iterator[int]:
    zone = spec._zone
    walls = copy.copy(spec._walls)
    walls.set_current(_first_wall(after_ms, zone), force=True)
    later: list[int] = []  # second instants of fold times, waiting for their turn
    last = after_ms
    while True:
        try:
            wall: datetime = walls.get_next(datetime)
        except (CroniterBadDateError, OverflowError, ValueError):
            break  # past datetime's year 9999 ("year 10000 is out of range")
        instants = _instants(wall, zone, spec.dst)
        if not instants:
            continue
        # Later wall times never map before this one's first instant, so every waiting
        # instant up to it is final.
        while later and later[0] <= instants[0]:
            value = heapq.heappop(later)
            if value > last:
                yield value
                last = value
        if instants[0] > last:
            yield instants[0]
            last = instants[0]
        for value in instants[1:]:
            heapq.heappush(later, value)
    for value in sorted(later):
        if value > last:
            yield value
            last = value


def _walls(fields: str, *, seconds_first: bool) -> tuple[Any, list[str]]:
    """The croniter a spec copies to iterate, and croniter's own problems with ``fields``
    (strict expansion, then a search for a first occurrence within the horizon): belt and
    braces behind ``check_fields``, which should already have refused everything."""
    try:
        croniter.expand(fields, second_at_beginning=seconds_first, strict=True)
        walls = croniter(
            fields,
            _HORIZON_START,
            ret_type=datetime,
            max_years_between_matches=NEVER_FIRES_HORIZON_YEARS,
            second_at_beginning=seconds_first,
            implement_cron_bug=True,  # the Vixie day rule: see this module's docstring
        )
        copy.copy(walls).get_next(datetime)
    except CroniterBadDateError:
        return None, [f"never fires: no occurrence within {NEVER_FIRES_HORIZON_YEARS} years"]
    except CroniterBadCronError as error:
        return None, [f"not accepted: {error}"]
    return walls, []


def first_wall_from(spec: CronSpec, wall: datetime) -> datetime | None:
    """The first naive wall-clock time at or after ``wall`` that ``spec``'s fields match
    (whether or not it exists in the zone), None past year 9999. One croniter step."""
    walls = copy.copy(spec._walls)
    walls.set_current(wall - _SECOND, force=True)
    try:
        found: datetime = walls.get_next(datetime)
    except (CroniterBadDateError, OverflowError, ValueError):
        return None
    return found


def dst_mark(spec: CronSpec, ms: int) -> tuple[DstMark, datetime] | None:
    """What a DST transition did to the occurrence ``ms`` of ``spec``, with the wall time
    it stands for: a fold time's first or last instant, or a gap's end that a wall time
    inside the gap was shifted to (``gap_shifted``, with the first such wall time). None
    for an ordinary occurrence. Costs a few offset look-ups, one croniter step at a gap."""
    zone = spec._zone
    local = to_datetime(ms).astimezone(zone)
    wall = local.replace(tzinfo=None, fold=0)
    before = _seconds(wall.replace(tzinfo=zone).utcoffset())
    after = _seconds(wall.replace(tzinfo=zone, fold=1).utcoffset())
    if before > after:
        return (DstMark.FOLD_LAST if local.fold else DstMark.FOLD_FIRST), wall
    second = ms // 1000
    jumped = offset_at(second, zone) - offset_at(second - 1, zone)
    if spec.dst.gap is Gap.SKIP or jumped <= 0:
        return None
    matched = first_wall_from(spec, wall - timedelta(seconds=jumped))
    if matched is None or matched >= wall:
        return None
    return DstMark.GAP_SHIFTED, matched


@cache
def _known_zones() -> frozenset[str]:
    # `localtime` and `posixrules` name whatever this machine is set to, not a place.
    return frozenset(available_timezones()) - {"localtime", "posixrules"}


def _zone(name: str) -> ZoneInfo | None:
    return ZoneInfo(name) if name in _known_zones() else None


# --- wall-clock time to instants --------------------------------------------------------


def _first_wall(after_ms: int, zone: ZoneInfo) -> datetime:
    """The wall time croniter starts after: early enough that a fold just after
    ``after_ms`` cannot hide an occurrence (its wall time lies before the local time of
    ``after_ms``); later instants are filtered out by the caller."""
    after_s = after_ms // 1000
    lowest = min(offset_at(after_s, zone), offset_at(after_s + _FOLD_REACH_S, zone))
    return _NAIVE_EPOCH + timedelta(seconds=after_s + lowest - 1)


def _instants(wall: datetime, zone: ZoneInfo, policy: DstPolicy) -> tuple[int, ...]:
    """The epoch ms at which the wall time ``wall`` fires, ascending (0, 1 or 2 values)."""
    local = wall.replace(tzinfo=zone)
    before = _seconds(local.utcoffset())  # PEP 495: fold=0 uses the earlier offset
    after = _seconds(local.replace(fold=1).utcoffset())
    base = (wall - _NAIVE_EPOCH) // _SECOND
    if before == after:
        return ((base - before) * 1000,)
    if before > after:  # a fold: the wall time happens twice
        earlier, later = (base - before) * 1000, (base - after) * 1000
        if policy.fold is Fold.FIRST:
            return (earlier,)
        return (later,) if policy.fold is Fold.LAST else (earlier, later)
    if policy.gap is Gap.SKIP:  # a gap: the wall time never happens
        return ()
    return (_transition(base - after, base - before, zone) * 1000,)


def _transition(low: int, high: int, zone: ZoneInfo) -> int:
    """The first epoch second in ``(low, high]`` with ``high``'s offset (a gap's end)."""
    return first_with_offset(low, high, zone, offset_at(high, zone))


def _seconds(offset: timedelta | None) -> int:
    assert offset is not None  # ZoneInfo always knows its offset
    return offset.days * 86_400 + offset.seconds


def _format_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")
