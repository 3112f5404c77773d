"""Cron expressions as text: the grammar Steeple accepts, checked field by field with
messages that name the field's position and say how to fix it. Pure text and numbers: what
the fields *mean* in time (croniter, days, daylight saving) is ``core.cron``'s.

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
  H``, a ``*`` item after the first item of a day field (``1,*/2``: whether a day field
  restricts the day depends on its first character, ADR 0037), and days of month that no
  listed month has (``0 0 31 2 *``). ``0 0 29 2 *`` fires in leap years.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

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


def check_fields(expression: str) -> tuple[str, list[str]]:
    """The fields croniter should iterate (macros expanded, lower case) and the problems
    found, each naming its field's position; with problems the first value is meaningless."""
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
    return fields_text, problems


def field_values(expression: str) -> tuple[set[int], ...]:
    """The values each of the five standard fields (minute, hour, day of month, month, day
    of week) of a valid expression allows; ValueError if it is not valid."""
    fields, problems = check_fields(expression)
    if problems:
        raise ValueError("; ".join(problems))
    return tuple(
        _check_field(text, spec)[0]
        for text, spec in zip(fields.split()[-5:], _FIVE_FIELDS, strict=True)
    )


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
