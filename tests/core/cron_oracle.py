"""An independent cron matcher for tests: the fields are read into sets here (not by
croniter), and the day rule of ADR 0037 is applied by hand.

A day field that starts with ``*`` is unrestricted; if either day field is, a day must
match both (AND), otherwise either (OR). Day of week 7 is Sunday, like 0; an open-ended
step (``1/2``, ``7/3``) runs from its start (7 read as 0) to Saturday, as croniter reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {
    "month": {name: number for number, name in enumerate(_MONTHS, start=1)},
    "weekday": {name: number for number, name in enumerate(_WEEKDAYS)},
}


def field_values(text: str, low: int, high: int, kind: str = "") -> frozenset[int]:
    """The values one field allows (``high`` is where ``*`` and ``n/step`` end)."""
    names = _NAMES.get(kind, {})

    def value(word: str) -> int:
        return names[word] if word in names else int(word)

    found: set[int] = set()
    for item in text.lower().split(","):
        base, slash, step = item.partition("/")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            start, end = base.split("-")
            first, last = value(start), value(end)
        else:
            first = value(base)
            if slash and kind == "weekday":
                first %= 7  # `7/3` runs from Sunday: 0,3,6
            last = high if slash else first
        found.update(range(first, last + 1, int(step) if slash else 1))
    return frozenset(found)


@dataclass(frozen=True, slots=True, kw_only=True)
class Oracle:
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday; 7 folded into 0
    both_days: bool  # a day field starts with `*`: AND; else OR

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_month_day = day.day in self.days
        by_weekday = day.isoweekday() % 7 in self.weekdays
        return by_month_day and by_weekday if self.both_days else by_month_day or by_weekday

    def matches(self, wall: datetime) -> bool:
        """Whether the naive wall-clock time ``wall`` matches every field."""
        return (
            wall.second in self.seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and self.matches_day(wall.date())
        )


def oracle(expression: str) -> Oracle:
    """The matcher for a 5-field or seconds-first 6-field expression (no macros)."""
    tokens = expression.split()
    seconds = field_values(tokens[0], 0, 59) if len(tokens) == 6 else frozenset({0})
    minute, hour, day, month, weekday = tokens[-5:]
    return Oracle(
        seconds=seconds,
        minutes=field_values(minute, 0, 59),
        hours=field_values(hour, 0, 23),
        days=field_values(day, 1, 31),
        months=field_values(month, 1, 12, "month"),
        weekdays=frozenset(v % 7 for v in field_values(weekday, 0, 6, "weekday")),
        both_days=day.startswith("*") or weekday.startswith("*"),
    )
