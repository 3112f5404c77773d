"""A cron expression in plain English: ``describe_cron("0 3 * * *")`` is
``"At 03:00 every day"``. Pure text: the grammar is ``core.cron_fields``'s, so an
expression it refuses raises the same ValidationError a create would.

Rules this module guards:

- One home for the wording: the API's preview answers it as ``description`` and the web
  UI shows the same sentence (docs/schedules.md, "Cron in words"); other kinds of
  schedule are said by :func:`describe_timing`.
- The time of day first: single values of second, minute and hour are a clock time
  (``At 09:30``), a few listed ones several (``At 09:00 and 17:00``); anything else is
  said field by field in crontab.guru's style (``At minute 0 past every 2nd hour``), and
  the plainest repeats shortly (``Every 5 minutes``).
- Then the days, by ADR 0037's rule: one day field given (the other ``*``) decides alone;
  both restricted fire on a day matching **either** (``on day 1 and 15 of the month, or
  on Friday``); a ``*``-led day field (``*/2``) beside a restricted one means **both**
  (``on every 2nd day of the month, if it is also Monday``). Then the months.
- Days of week and months are said by their values (``*/2`` in day of week is Tuesday,
  Thursday, Saturday and Sunday), Monday first, runs of three or more as ``Monday
  through Friday``; the other fields as written (steps and ranges), as people read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from appliance.core.cron_fields import check_fields
from appliance.core.instants import format_instant
from appliance.core.timing import ScheduleKind, Timing, kind_of
from appliance.errors import FieldError, ValidationError

_DAY_NAMES: Final = (
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
)
_WEEK: Final = (*_DAY_NAMES[1:], _DAY_NAMES[0])
MONTH_NAMES: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_SHORT_DAYS: Final = {name[:3].lower(): i for i, name in enumerate(_DAY_NAMES)}
_SHORT_MONTHS: Final = {name[:3].lower(): i + 1 for i, name in enumerate(MONTH_NAMES)}
_MAX_CLOCK_TIMES: Final = 6  # "At 09:00, 12:00 and 17:00"; more are said field by field
_LIMITS: Final = {"second": (0, 59), "minute": (0, 59), "hour": (0, 23), "day": (1, 31)}


def describe_cron(expression: str) -> str:
    """The expression in words; ValidationError (field ``cron``) if it is not valid."""
    fields, problems = check_fields(expression)
    if problems:
        raise ValidationError([FieldError(field="cron", message=p) for p in problems])
    tokens = ["*" if token == "*/1" else token for token in fields.split()]  # the same
    second = tokens[0] if len(tokens) == 6 else "0"
    minute, hour, days, months, weekdays = tokens[-5:]
    sentence = _time_of_day(second, minute, hour)
    day_words = _days(days, weekdays)
    if day_words:
        sentence += " " + day_words
    elif sentence.startswith("At ") and ":" in sentence:
        sentence += " every day"
    if months != "*":
        sentence += " in " + _named(_values(months, 1, 12, _SHORT_MONTHS), MONTH_NAMES, 1)
    return sentence


# --- the time of day ---------------------------------------------------------------------


def _time_of_day(second: str, minute: str, hour: str) -> str:
    clock = _clock_times(second, minute, hour)
    if clock is not None:
        return "At " + _join(clock)
    if hour == "*" and second == "0":
        if minute == "*":
            return "Every minute"
        if minute.startswith("*/"):
            return f"Every {minute[2:]} minutes"
    if hour == "*" and minute == "*":
        if second == "*":
            return "Every second"
        if second.startswith("*/"):
            return f"Every {second[2:]} seconds"
    parts = []
    if second != "0":
        parts.append(_field(second, "second"))
    parts.append(_field(minute, "minute"))
    if hour != "*":
        parts.append(_field(hour, "hour"))
    elif minute != "*" and not minute.startswith("*"):
        parts.append("every hour")
    text = " past ".join(parts)
    return "At " + text


def _clock_times(second: str, minute: str, hour: str) -> list[str] | None:
    """``["09:00", "17:00"]`` when every field is one value or a short list of values."""
    lists = [_plain_list(token) for token in (second, minute, hour)]
    if any(values is None for values in lists):
        return None
    seconds, minutes, hours = (values or [] for values in lists)
    if len(seconds) * len(minutes) * len(hours) > _MAX_CLOCK_TIMES:
        return None
    with_seconds = seconds != [0]
    return [
        f"{h:02d}:{m:02d}" + (f":{s:02d}" if with_seconds else "")
        for h in hours
        for m in minutes
        for s in seconds
    ]


def _plain_list(token: str) -> list[int] | None:
    items = token.split(",")
    if not all(item.isdigit() for item in items):
        return None
    return sorted({int(item) for item in items})


def _field(token: str, unit: str) -> str:
    """One field of second, minute, hour or day of month as written: ``minute 0 and 30``,
    ``every 2nd hour``, ``every minute from 5 through 10``."""
    singles = [item for item in token.split(",") if item.isdigit()]
    others = [_item(item, unit) for item in token.split(",") if not item.isdigit()]
    parts = [f"{unit} {_join(singles)}"] if singles else []
    return _join([*parts, *others])


def _item(item: str, unit: str) -> str:
    base, _, step_text = item.partition("/")
    step = int(step_text) if step_text else 1
    every = f"every {_ordinal(step)} {unit}" if step > 1 else f"every {unit}"
    if base == "*":
        return every
    first, _, last = base.partition("-")
    return f"{every} from {first} through {last or _LIMITS[unit][1]}"


def _ordinal(number: int) -> str:
    suffix = (
        "th" if 11 <= number % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    )
    return f"{number}{suffix}"


# --- days and months ---------------------------------------------------------------------


def _days(days: str, weekdays: str) -> str:
    """The day clause, or '' when every day fires."""
    month_days = "" if days == "*" else f"on {_field(days, 'day')} of the month"
    if weekdays == "*":
        return month_days
    # Monday first, so that 5-7 reads "Friday through Sunday".
    week = sorted((value - 1) % 7 for value in _values(weekdays, 0, 7, _SHORT_DAYS))
    if not month_days:
        return "" if len(week) == 7 else "on " + _named(week, _WEEK, 0)
    if days.startswith("*") or weekdays.startswith("*"):  # ADR 0037: both must match
        return f"{month_days}, if it is also {_named(week, _WEEK, 0, word='or')}"
    return f"{month_days}, or on {_named(week, _WEEK, 0)}"  # ADR 0037: either


def _values(token: str, low: int, high: int, names: dict[str, int]) -> list[int]:
    """The values a day-of-week or month field allows (7 is Sunday, 0)."""
    found: set[int] = set()
    for item in token.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            start, end = low, high
        else:
            first, dash, last = base.partition("-")
            start = _number(first, names)
            end = _number(last, names) if dash else (high if step_text else start)
        found.update(range(start, end + 1, step))
    if low == 0 and 7 in found:
        found = (found - {7}) | {0}
    return sorted(found)


def _number(text: str, names: dict[str, int]) -> int:
    return names[text] if text in names else int(text)


def _named(values: Sequence[int], names: Sequence[str], first: int, *, word: str = "and") -> str:
    """``Monday through Friday``, ``January, April and July``: runs of 3+ as ranges."""
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    parts = []
    for run in runs:
        if len(run) >= 3:
            parts.append(f"{names[run[0] - first]} through {names[run[-1] - first]}")
        else:
            parts.extend(names[value - first] for value in run)
    return _join(parts, word=word)


def _join(parts: Sequence[str], *, word: str = "and") -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return f"{', '.join(parts[:-1])} {word} {parts[-1]}"


# --- any timing ---------------------------------------------------------------------------

_PERIODS: Final = ((86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second"))


def describe_timing(timing: Timing) -> str:
    """Any kind of schedule in words (core.timing): a cron expression as
    :func:`describe_cron` says it, a one-off by its instant, an interval by its period;
    bounds, when set, follow (instants in UTC, as the API writes them)."""
    kind = kind_of(timing)
    if kind is ScheduleKind.AT and timing.at is not None:
        return f"Once, at {format_instant(timing.at)}"
    if kind is ScheduleKind.EVERY and timing.every_seconds is not None:
        sentence = "Every " + _period(timing.every_seconds)
    else:
        sentence = describe_cron(timing.cron)
    if timing.start_at is not None:
        sentence += f", from {format_instant(timing.start_at)}"
    if timing.end_at is not None:
        sentence += f", until {format_instant(timing.end_at)}"
    return sentence


def _period(seconds: int) -> str:
    """``90`` is "90 seconds", ``900`` "15 minutes", ``86400`` "day": the largest unit
    that divides it."""
    for size, unit in _PERIODS:
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    raise AssertionError("every period is a whole number of seconds")
