"""Cron expressions: strict parsing, and the occurrences they produce in an IANA timezone.

The only module that imports croniter (an import-linter contract says so).

Grammar (checked here, field by field, before croniter sees the expression):
- 5 fields ``minute hour day-of-month month day-of-week``, or 6 with the *seconds first*
  ``second minute hour day-of-month month day-of-week``; or one macro: ``@yearly``,
  ``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly``.
  ``@reboot`` has no meaning for a time-based scheduler and is refused.
- Each field is a comma list of items; an item is ``*``, a value, or a range ``a-b``
  (``a < b``), optionally followed by a step ``/n`` (``*/15``, ``1-30/5``, ``10/5`` =
  from 10 to the field's maximum every 5). Months accept ``jan``-``dec``, days of week
  ``sun``-``sat``; day of week 0 and 7 are both Sunday.
- Refused, with the field's position in the message: values out of range, reversed ranges
  (``22-2``; write ``22-23,0-2``), equal-ended ranges (croniter 7 reads ``5-5`` as the
  whole cycle; write ``5``), steps outside 1..field size, croniter's extensions ``L W # ?
  H``, a ``*`` item after the first item of a day field (``1,*/2``: see the day rule), and
  specs that can never fire (``0 0 31 2 *``). ``0 0 29 2 *`` fires in leap years.
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
- Output is strictly increasing epoch ms, whole seconds, every value > ``after_ms``; two
  wall times that land on the same instant (a gap time shifted onto the gap's end, which
  is itself an occurrence) fire once. Iteration ends before :data:`END_MS` (the start of
  year 9999 UTC), so every occurrence has an ordinary local time and text form in any zone.
- Size: an expression longer than :data:`MAX_EXPRESSION_CHARS` is refused before anything
  else looks at it (a 200-character spec parses in about 1 ms; see ``parse_cron``).
"""

from __future__ import annotations

import copy
import functools
import heapq
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from appliance.core.instants import to_datetime
from appliance.errors import FieldError, ValidationError

# A spec that cannot fire within this many years from 2000-01-01 never fires: the weekdays
# of the calendar repeat every 28 years until 2100, so every (month, day, weekday) that
# exists (29 February on a Sunday: 2004, then 2032) occurs within 28 years of 2000.
NEVER_FIRES_HORIZON_YEARS = 28
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

_MACROS: Mapping[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELD_COUNT_ERROR = "expected 5 fields (or 6 with seconds first), got {}"
_UNSUPPORTED_WORDS = frozenset({"l", "w", "lw", "h"})  # croniter extensions, refused
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February: leap years


@dataclass(frozen=True, slots=True, kw_only=True)
class _Field:
    name: str
    low: int
    high: int
    names: Mapping[str, int] = field(default_factory=dict)
    hint: str = ""


_SECOND_FIELD = _Field(name="second", low=0, high=59)
_FIVE_FIELDS = (
    _Field(name="minute", low=0, high=59),
    _Field(name="hour", low=0, high=23),
    _Field(name="day of month", low=1, high=31),
    _Field(
        name="month",
        low=1,
        high=12,
        names={n: i + 1 for i, n in enumerate(_MONTH_NAMES)},
        hint="1-12 or jan-dec",
    ),
    _Field(
        name="day of week",
        low=0,
        high=7,
        names={n: i for i, n in enumerate(_DAY_NAMES)},
        hint="0-7 or sun-sat",
    ),
)


class _Problem(Exception):
    """One item of one field is wrong; the message omits the field's position."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CronSpec:
    """A validated cron expression in an IANA timezone. Build it with ``parse_cron``."""

    expression: str
    timezone: str
    _fields: str = field(repr=False, compare=False)  # what croniter iterates (macros expanded)
    _seconds_first: bool = field(repr=False, compare=False)
    _wildcard: bool = field(repr=False, compare=False)
    _zone: ZoneInfo = field(repr=False, compare=False)


def parse_cron(expression: str, timezone: str = "UTC") -> CronSpec:
    """Validate ``expression`` and ``timezone``; raise ``ValidationError`` listing every
    problem found (fields ``"cron"`` and ``"timezone"``). Valid specs are memoised: the
    planner parses each stored schedule on every pass, and validation costs ~1 ms."""
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
    return _parse_cron(expression, timezone)


@functools.lru_cache(maxsize=4096)
def _parse_cron(expression: str, timezone: str) -> CronSpec:
    errors: list[FieldError] = []
    fields, cron_problems = _check_expression(expression)
    errors.extend(FieldError(field="cron", message=p) for p in cron_problems)
    zone = _zone(timezone)
    if zone is None:
        message = f"unknown IANA timezone {timezone!r}; use a name such as Europe/London or UTC"
        errors.append(FieldError(field="timezone", message=message))
    if errors or zone is None:
        raise ValidationError(errors)
    tokens = fields.split()
    clock_fields = tokens[-5:-3]  # minute and hour, wherever the seconds went
    return CronSpec(
        expression=expression,
        timezone=timezone,
        _fields=fields,
        _seconds_first=len(tokens) == 6,
        _wildcard=any("*" in token for token in clock_fields),
        _zone=zone,
    )


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
    walls = copy.copy(_expanded(spec._fields, seconds_first=spec._seconds_first))
    walls.set_current(_first_wall(after_ms, zone), force=True)
    later: list[int] = []  # second instants of fold times, waiting for their turn
    last = after_ms
    while True:
        try:
            wall: datetime = walls.get_next(datetime)
        except (CroniterBadDateError, OverflowError, ValueError):
            break  # past datetime's year 9999 ("year 10000 is out of range")
        instants = _instants(wall, zone, wildcard=spec._wildcard)
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


class SharedOccurrences:
    """Occurrences computed once per (expression, timezone, start) and shared by every
    consumer: many schedules share an expression, a timezone and — planned in the same
    pass — a cursor. Lives for one planner pass (it keeps what it computed).

    The first few occurrences after a start also come from a bounded memo that outlives
    the pass (:func:`_leading`): the schedules sharing a cursor are spread over several
    passes, and each would otherwise step croniter from the same start again."""

    def __init__(self) -> None:
        self._streams: dict[tuple[str, str, int], tuple[list[int], Iterator[int]]] = {}

    def after(self, spec: CronSpec, after_ms: int) -> Iterator[int]:
        """The same values as ``occurrences_after(spec, after_ms)``."""
        key = (spec.expression, spec.timezone, after_ms)
        entry = self._streams.get(key)
        if entry is None:
            leading = _leading(spec, after_ms)
            # Resuming after any occurrence continues the same sequence (tested property).
            rest = occurrences_after(spec, leading[-1]) if len(leading) == _LEADING else iter(())
            entry = self._streams[key] = (list(leading), rest)
        values, source = entry
        index = 0
        while True:
            if index == len(values):
                value = next(source, None)
                if value is None:
                    return
                values.append(value)
            yield values[index]
            index += 1


# A planner pass reads the next occurrence and the one after it (is it the last before the
# horizon? jitter's gap); the third serves jitter's look at the following one's due time.
_LEADING = 3


@lru_cache(maxsize=8192)
def _leading(spec: CronSpec, after_ms: int) -> tuple[int, ...]:
    """The first ``_LEADING`` occurrences after ``after_ms`` (fewer only at year 9999).
    A pure function of its arguments; ``CronSpec`` hashes as (expression, timezone)."""
    return tuple(itertools.islice(occurrences_after(spec, after_ms), _LEADING))


# --- validation -------------------------------------------------------------------------


def _check_expression(expression: str) -> tuple[str, list[str]]:
    """The expression croniter should iterate (macros expanded, lower case) and the
    problems found; when there are problems the first value is meaningless."""
    tokens = expression.split()
    if tokens and tokens[0].startswith("@"):
        return _expand_macro([t.lower() for t in tokens])
    if len(tokens) not in (5, 6):
        return "", [_FIELD_COUNT_ERROR.format(len(tokens))]
    fields = (_SECOND_FIELD, *_FIVE_FIELDS) if len(tokens) == 6 else _FIVE_FIELDS
    problems: list[str] = []
    values: list[set[int]] = []
    for position, (text, spec) in enumerate(zip(tokens, fields, strict=True), start=1):
        found, field_problems = _check_field(text, spec)
        values.append(found)
        problems.extend(f"field {position} ({spec.name}): {p}" for p in field_problems)
    fields_text = " ".join(tokens).lower()
    if not problems:
        problems.extend(_check_dates(tokens, values))
    if not problems:
        problems.extend(_check_with_croniter(fields_text, seconds_first=len(tokens) == 6))
    return fields_text, problems


def _expand_macro(tokens: list[str]) -> tuple[str, list[str]]:
    macro = tokens[0]
    if len(tokens) > 1:
        return "", [f"{macro} stands alone; got {len(tokens) - 1} more field(s) after it"]
    if macro == "@reboot":
        return "", ["@reboot is not supported: schedules fire by time; use e.g. @daily"]
    if macro not in _MACROS:
        names = ", ".join(_MACROS)
        return "", [f"unknown macro {macro!r}; use one of {names}"]
    return _MACROS[macro], []


def _check_field(text: str, spec: _Field) -> tuple[set[int], list[str]]:
    """The values one field allows, and its problems (without the position)."""
    values: set[int] = set()
    problems: list[str] = []
    items = text.split(",")
    if spec.name.startswith("day") and any(item.startswith("*") for item in items[1:]):
        # Whether a day field restricts the day depends on its first character (the day
        # rule above); croniter reads `1,*/1` as unrestricted, Vixie cron as restricted.
        problems.append(
            f"{text!r}: * may only start a day field (it makes the field unrestricted); "
            "list the days instead"
        )
    for item in items:
        try:
            values.update(_item_values(item, text, spec))
        except _Problem as problem:
            problems.append(str(problem))
    return values, problems


def _item_values(item: str, text: str, spec: _Field) -> range:
    if not item:
        raise _Problem(f"empty list item in {text!r}")
    if "#" in item or "?" in item or _UNSUPPORTED_WORDS & set(re.findall("[a-z]+", item.lower())):
        raise _Problem(
            f"{item!r}: L, W, #, ? and H are not supported; use numbers, ranges (1-5), "
            "steps (*/15) and lists (1,15)"
        )
    base, slash, step_text = item.partition("/")
    step = _step(step_text, spec) if slash else 1
    if base == "*":
        return range(spec.low, spec.high + 1, step)
    first, dash, last = base.partition("-")
    if not first:
        raise _Problem(f"{item!r} is not a value or range (negative numbers do not exist)")
    start = _value(first, spec)
    if not dash:
        return range(start, (spec.high if slash else start) + 1, step)
    end = _value(last, spec)
    if start > end:
        raise _Problem(
            f"range {base} is reversed; write two ranges, e.g. {first}-{spec.high},"
            f"{spec.low}-{last}"
        )
    if start == end:
        raise _Problem(f"range {base} has equal ends; write {first}")
    return range(start, end + 1, step)


def _value(text: str, spec: _Field) -> int:
    if text.lower() in spec.names:
        return spec.names[text.lower()]
    if not text.isdigit() or not text.isascii():
        wanted = spec.hint or f"a number {spec.low}-{spec.high}"
        raise _Problem(f"{text!r} is not a {spec.name} value; use {wanted}")
    number = int(text)
    if not spec.low <= number <= spec.high:
        raise _Problem(f"{number} is out of range {spec.low}-{spec.high}")
    return number


def _step(text: str, spec: _Field) -> int:
    size = 7 if spec.name == "day of week" else spec.high - spec.low + 1
    if not text.isdigit() or not text.isascii() or not 1 <= int(text) <= size:
        raise _Problem(f"step {text!r} must be a number 1-{size}")
    return int(text)


def _check_dates(tokens: list[str], values: list[set[int]]) -> list[str]:
    """Refuse days of month that no listed month has (``31 2``), naming the position.
    Also when the day of week is restricted (``0 0 31 2 1``): Vixie cron would fire on
    February's Mondays, but such a line is a mistake far more often than a wish."""
    offset = len(tokens) - 5
    days, months = values[offset + 2], values[offset + 3]
    if tokens[offset + 2] == "*" or not days or not months:
        return []
    if min(days) <= max(_DAYS_IN_MONTH[m - 1] for m in months):
        return []
    month_text = ",".join(_MONTH_NAMES[m - 1] for m in sorted(months))
    day_text = ",".join(str(d) for d in sorted(days))
    days_are = "day {} does" if len(days) == 1 else "days {} do"
    return [
        f"field {offset + 3} (day of month): {days_are.format(day_text)} not exist in"
        f" {month_text}; the schedule would never fire"
    ]


def _check_with_croniter(fields: str, *, seconds_first: bool) -> list[str]:
    """croniter's own strict check, and a search for a first occurrence: belt and braces
    behind the field checks above, which should already have refused everything."""
    try:
        croniter.expand(fields, second_at_beginning=seconds_first, strict=True)
        croniter(
            fields,
            _HORIZON_START,
            max_years_between_matches=NEVER_FIRES_HORIZON_YEARS,
            second_at_beginning=seconds_first,
            implement_cron_bug=True,
        ).get_next(datetime)
    except CroniterBadDateError:
        return [f"never fires: no occurrence within {NEVER_FIRES_HORIZON_YEARS} years"]
    except CroniterBadCronError as error:
        return [f"not accepted: {error}"]
    return []


@lru_cache(maxsize=4096)
def _expanded(fields: str, *, seconds_first: bool) -> Any:
    """A croniter for ``fields``, to be shallow-copied, never iterated itself. Expanding an
    expression costs ≈ 0.5 ms, far more than an occurrence; croniter never mutates the
    expanded lists it shares with its copies (it copies them before changing them)."""
    return croniter(
        fields,
        _HORIZON_START,
        ret_type=datetime,
        second_at_beginning=seconds_first,
        implement_cron_bug=True,  # the Vixie day rule: see this module's docstring
    )


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
    lowest = min(_offset_at(after_s, zone), _offset_at(after_s + _FOLD_REACH_S, zone))
    return _NAIVE_EPOCH + timedelta(seconds=after_s + lowest - 1)


def _instants(wall: datetime, zone: ZoneInfo, *, wildcard: bool) -> tuple[int, ...]:
    """The epoch ms at which the wall time ``wall`` fires, ascending (0, 1 or 2 values)."""
    local = wall.replace(tzinfo=zone)
    before = _seconds(local.utcoffset())  # PEP 495: fold=0 uses the earlier offset
    after = _seconds(local.replace(fold=1).utcoffset())
    base = (wall - _NAIVE_EPOCH) // _SECOND
    if before == after:
        return ((base - before) * 1000,)
    if before > after:  # a fold: the wall time happens twice
        earlier, later = base - before, base - after
        return (earlier * 1000, later * 1000) if wildcard else (earlier * 1000,)
    if wildcard:  # a gap: the wall time never happens
        return ()
    return (_transition(base - after, base - before, zone) * 1000,)


def _transition(low: int, high: int, zone: ZoneInfo) -> int:
    """The first epoch second in ``(low, high]`` with ``high``'s offset (a gap's end)."""
    target = _offset_at(high, zone)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset_at(middle, zone) == target:
            high = middle
        else:
            low = middle
    return high


def _offset_at(epoch_s: int, zone: ZoneInfo) -> int:
    return _seconds(datetime.fromtimestamp(epoch_s, tz=UTC).astimezone(zone).utcoffset())


def _seconds(offset: timedelta | None) -> int:
    assert offset is not None  # ZoneInfo always knows its offset
    return offset.days * 86_400 + offset.seconds


def _format_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")
