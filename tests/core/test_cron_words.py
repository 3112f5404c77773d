"""``describe_cron``: goldens over fields of every shape (values, lists, ranges, steps,
names, macros, seconds), ADR 0037's day rule in words, and a property that every valid
expression gets a sentence."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import assume, given, settings

from appliance.core.cron import day_rule, parse_cron
from appliance.core.cron_words import describe_cron, describe_timing
from appliance.errors import ValidationError
from tests.core.test_cron_properties import EXPRESSIONS

GOLDENS = [
    # Repeats and plain times.
    ("* * * * *", "Every minute"),
    ("*/5 * * * *", "Every 5 minutes"),
    ("*/15 * * * *", "Every 15 minutes"),
    ("0 3 * * *", "At 03:00 every day"),
    ("30 9 * * *", "At 09:30 every day"),
    ("0 9,17 * * *", "At 09:00 and 17:00 every day"),
    ("0 0,6,12,18 * * *", "At 00:00, 06:00, 12:00 and 18:00 every day"),
    # Field by field.
    ("0 */2 * * 1", "At minute 0 past every 2nd hour on Monday"),
    ("0 */3 * * *", "At minute 0 past every 3rd hour"),
    ("*/5 9-17 * * *", "At every 5th minute past every hour from 9 through 17"),
    ("0,30 9-17 * * *", "At minute 0 and 30 past every hour from 9 through 17"),
    ("5,10-20/5 * * * *", "At minute 5 and every 5th minute from 10 through 20 past every hour"),
    ("10/5 * * * *", "At every 5th minute from 10 through 59 past every hour"),
    ("* 3 * * *", "At every minute past hour 3"),
    ("0 1-23/11 * * *", "At minute 0 past every 11th hour from 1 through 23"),
    ("0 */12 * * *", "At minute 0 past every 12th hour"),
    ("0 */21 * * *", "At minute 0 past every 21st hour"),
    ("0 0,1,2,3,4,5,6 * * *", "At minute 0 past hour 0, 1, 2, 3, 4, 5 and 6"),
    # Seconds first.
    ("*/10 * * * * *", "Every 10 seconds"),
    ("* * * * * *", "Every second"),
    ("0 */10 * * * *", "Every 10 minutes"),
    ("30 0 3 * * *", "At 03:00:30 every day"),
    ("15 * * * * *", "At second 15 past every minute"),
    ("30 */5 * * * *", "At second 30 past every 5th minute"),
    # Macros.
    ("@hourly", "At minute 0 past every hour"),
    ("@daily", "At 00:00 every day"),
    ("@midnight", "At 00:00 every day"),
    ("@weekly", "At 00:00 on Sunday"),
    ("@monthly", "At 00:00 on day 1 of the month"),
    ("@yearly", "At 00:00 on day 1 of the month in January"),
    # Days of week: values, Monday first, runs of three as ranges.
    ("30 9 * * 1-5", "At 09:30 on Monday through Friday"),
    ("0 22 * * 0,6", "At 22:00 on Saturday and Sunday"),
    ("0 0 * * 5-7", "At 00:00 on Friday through Sunday"),
    ("0 0 * * 7", "At 00:00 on Sunday"),
    ("* * * * 7/1", "Every minute on Sunday"),
    ("0 0 * * 0-7", "At 00:00 every day"),
    ("0 0 * * 6/1", "At 00:00 on Saturday and Sunday"),
    ("0 0 * * */2", "At 00:00 on Tuesday, Thursday, Saturday and Sunday"),
    ("0 8 * * 1-5/2", "At 08:00 on Monday, Wednesday and Friday"),
    ("0 8 * * MON,wed,Fri", "At 08:00 on Monday, Wednesday and Friday"),
    # Days of month as written.
    ("0 0 1-7 * *", "At 00:00 on every day from 1 through 7 of the month"),
    ("0 0 31 * *", "At 00:00 on day 31 of the month"),
    ("0 0 */2 * *", "At 00:00 on every 2nd day of the month"),
    ("0 0 */1 * 1", "At 00:00 on Monday"),
    ("*/1 * * * *", "Every minute"),
    ("0 0 * */1 */1", "At 00:00 every day"),
    # ADR 0037: both restricted is OR; a *-led field beside a restricted one is AND.
    ("0 0 1,15 * 5", "At 00:00 on day 1 and 15 of the month, or on Friday"),
    ("0 0 */2 * 1", "At 00:00 on every 2nd day of the month, if it is also Monday"),
    (
        "0 0 15 * */3",
        "At 00:00 on day 15 of the month, if it is also Wednesday, Saturday or Sunday",
    ),
    ("0 0 0 */2 * 1", "At 00:00 on every 2nd day of the month, if it is also Monday"),
    # Months.
    ("0 0 29 2 *", "At 00:00 on day 29 of the month in February"),
    ("0 0 * */3 *", "At 00:00 every day in January, April, July and October"),
    (
        "0 12 * jan-mar,jul mon,wed,fri",
        "At 12:00 on Monday, Wednesday and Friday in January through March and July",
    ),
    ("0 0 1 6-8 *", "At 00:00 on day 1 of the month in June through August"),
]


@pytest.mark.parametrize(("expression", "words"), GOLDENS)
def test_describe_cron(expression: str, words: str) -> None:
    assert describe_cron(expression) == words


@pytest.mark.parametrize("expression", ["0 0 L * *", "0 0 15W * *", "0 0 * * 5#2", "nope"])
def test_refused_expressions_raise_the_create_error(expression: str) -> None:
    with pytest.raises(ValidationError) as error:
        describe_cron(expression)
    assert [e.field for e in error.value.errors] == ["cron"]


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_every_valid_expression_has_a_sentence(expression: str) -> None:
    try:
        words = describe_cron(expression)
    except ValidationError:
        assume(False)  # e.g. day 31 in February only: refused by the grammar
        raise
    assert words[:1].isupper() and "  " not in words and not words.endswith(" ")
    # The day rule in words is the one core.cron applies (ADR 0037).
    rule = day_rule(parse_cron(expression)) or ""
    assert (", or on " in words) == rule.startswith("either")
    if ", if it is also " in words:
        assert rule.startswith("both")


def _timing(**fields: object) -> SimpleNamespace:
    base: dict[str, object] = {"cron": "", "timezone": "UTC", "at": None, "every_seconds": None}
    return SimpleNamespace(**{**base, "start_at": None, "end_at": None, **fields})


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"cron": "0 3 * * *"}, "At 03:00 every day"),
        ({"every_seconds": 90}, "Every 90 seconds"),
        ({"every_seconds": 900}, "Every 15 minutes"),
        ({"every_seconds": 7200}, "Every 2 hours"),
        ({"every_seconds": 86_400}, "Every day"),
        ({"at": 1_798_128_000_000}, "Once, at 2026-12-24T16:00:00Z"),
        (
            {"every_seconds": 60, "start_at": 1_798_128_000_000, "end_at": 1_798_214_400_000},
            "Every minute, from 2026-12-24T16:00:00Z, until 2026-12-25T16:00:00Z",
        ),
    ],
)
def test_every_kind_of_timing_is_said_in_words(fields: dict[str, object], words: str) -> None:
    assert describe_timing(_timing(**fields)) == words  # type: ignore[arg-type]
