"""Cron parsing: strict validation with positioned messages, macros, seconds-first fields."""

from __future__ import annotations

import itertools

import pytest

from appliance.core.cron import CronSpec, occurrences_after, parse_cron
from appliance.core.instants import format_instant, parse_instant
from appliance.errors import FieldError, ValidationError

UNSUPPORTED = (
    ": L, W, #, ? and H are not supported; use numbers, ranges (1-5), steps (*/15) and lists (1,15)"
)
NEVER = "; the schedule would never fire"
MACROS = "@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"


def errors_of(expression: str, timezone: str = "UTC") -> list[FieldError]:
    with pytest.raises(ValidationError) as caught:
        parse_cron(expression, timezone)
    return caught.value.errors


def cron_messages(expression: str) -> list[str]:
    errors = errors_of(expression)
    assert {e.field for e in errors} == {"cron"}
    return [e.message for e in errors]


def fires(expression: str, after: str, count: int, timezone: str = "UTC") -> list[str]:
    spec = parse_cron(expression, timezone)
    found = itertools.islice(occurrences_after(spec, parse_instant(after)), count)
    return [format_instant(ms) for ms in found]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "expected 5 fields (or 6 with seconds first), got 0"),
        ("25 2 *", "expected 5 fields (or 6 with seconds first), got 3"),
        ("* * * * * * *", "expected 5 fields (or 6 with seconds first), got 7"),
        ("60 * * * *", "field 1 (minute): 60 is out of range 0-59"),
        ("0 25 * * *", "field 2 (hour): 25 is out of range 0-23"),
        ("0 0 0 * *", "field 3 (day of month): 0 is out of range 1-31"),
        ("0 0 32 * *", "field 3 (day of month): 32 is out of range 1-31"),
        ("0 0 * 13 *", "field 4 (month): 13 is out of range 1-12"),
        ("0 0 * * 8", "field 5 (day of week): 8 is out of range 0-7"),
        ("61 0 0 * * *", "field 1 (second): 61 is out of range 0-59"),
        ("0 0 25 * * *", "field 3 (hour): 25 is out of range 0-23"),
        ("0 0 0 * * 9", "field 6 (day of week): 9 is out of range 0-7"),
        ("x * * * *", "field 1 (minute): 'x' is not a minute value; use a number 0-59"),
        ("0 0 * foo *", "field 4 (month): 'foo' is not a month value; use 1-12 or jan-dec"),
        (
            "0 0 * * thx",
            "field 5 (day of week): 'thx' is not a day of week value; use 0-7 or sun-sat",
        ),
        ("0 0 * Jan-Mon *", "field 4 (month): 'Mon' is not a month value; use 1-12 or jan-dec"),
        ("1,,2 * * * *", "field 1 (minute): empty list item in '1,,2'"),
        (
            "-5 * * * *",
            "field 1 (minute): '-5' is not a value or range (negative numbers do not exist)",
        ),
        ("5-5 * * * *", "field 1 (minute): range 5-5 has equal ends; write 5"),
        (
            "0 22-2 * * *",
            "field 2 (hour): range 22-2 is reversed; write two ranges, e.g. 22-23,0-2",
        ),
        ("*/0 * * * *", "field 1 (minute): step '0' must be a number 1-60"),
        ("0 */25 * * *", "field 2 (hour): step '25' must be a number 1-24"),
        ("*/x * * * *", "field 1 (minute): step 'x' must be a number 1-60"),
        ("0 0 * * 1#2", "field 5 (day of week): '1#2'" + UNSUPPORTED),
        ("0 0 L * *", "field 3 (day of month): 'L'" + UNSUPPORTED),
        ("0 0 15W * *", "field 3 (day of month): '15W'" + UNSUPPORTED),
        ("h * * * *", "field 1 (minute): 'h'" + UNSUPPORTED),
        ("0 0 ? * *", "field 3 (day of month): '?'" + UNSUPPORTED),
        ("@reboot", "@reboot is not supported: schedules fire by time; use e.g. @daily"),
        ("@fortnightly", f"unknown macro '@fortnightly'; use one of {MACROS}"),
        ("@daily 5", "@daily stands alone; got 1 more field(s) after it"),
    ],
)
def test_each_bad_input_gets_a_message_naming_its_position(expression: str, message: str) -> None:
    assert cron_messages(expression) == [message]


def test_every_problem_is_reported_at_once() -> None:
    errors = errors_of("61 25 * * *", "Mars/Olympus")
    assert errors == [
        FieldError(field="cron", message="field 1 (minute): 61 is out of range 0-59"),
        FieldError(field="cron", message="field 2 (hour): 25 is out of range 0-23"),
        FieldError(
            field="timezone",
            message="unknown IANA timezone 'Mars/Olympus'; use a name such as Europe/London or UTC",
        ),
    ]


def test_several_problems_in_one_field_are_each_reported() -> None:
    assert cron_messages("60,70 * * * *") == [
        "field 1 (minute): 60 is out of range 0-59",
        "field 1 (minute): 70 is out of range 0-59",
    ]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 0 31 2 *", f"field 3 (day of month): day 31 does not exist in feb{NEVER}"),
        ("0 0 30 2 *", f"field 3 (day of month): day 30 does not exist in feb{NEVER}"),
        ("0 0 30,31 feb *", f"field 3 (day of month): days 30,31 do not exist in feb{NEVER}"),
        (
            "0 0 31 4,6,9,11 *",
            f"field 3 (day of month): day 31 does not exist in apr,jun,sep,nov{NEVER}",
        ),
        ("0 0 0 31 2 *", f"field 4 (day of month): day 31 does not exist in feb{NEVER}"),
    ],
)
def test_specs_that_can_never_fire_are_refused(expression: str, message: str) -> None:
    assert cron_messages(expression) == [message]


def test_leap_day_is_accepted_and_fires_in_leap_years_only() -> None:
    assert fires("0 0 29 2 *", "2026-01-01T00:00:00Z", 3) == [
        "2028-02-29T00:00:00Z",
        "2032-02-29T00:00:00Z",
        "2036-02-29T00:00:00Z",
    ]


def test_a_day_that_exists_in_one_listed_month_is_accepted() -> None:
    assert fires("0 0 31 2,3 *", "2026-01-01T00:00:00Z", 2) == [
        "2026-03-31T00:00:00Z",
        "2027-03-31T00:00:00Z",
    ]


@pytest.mark.parametrize("timezone", ["Mars/Olympus", "", "localtime", "../etc/passwd", "America"])
def test_unknown_timezones_are_refused(timezone: str) -> None:
    assert errors_of("0 0 * * *", timezone) == [
        FieldError(
            field="timezone",
            message=f"unknown IANA timezone {timezone!r}; use a name such as Europe/London or UTC",
        )
    ]


def test_seconds_come_first_in_six_fields() -> None:
    assert fires("*/10 * * * * *", "2026-01-01T00:00:00Z", 4) == [
        "2026-01-01T00:00:10Z",
        "2026-01-01T00:00:20Z",
        "2026-01-01T00:00:30Z",
        "2026-01-01T00:00:40Z",
    ]
    assert fires("30 0 9 * * *", "2026-01-01T00:00:00Z", 2) == [
        "2026-01-01T09:00:30Z",
        "2026-01-02T09:00:30Z",
    ]


@pytest.mark.parametrize(
    ("macro", "expanded"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@HOURLY", "0 * * * *"),
    ],
)
def test_macros_fire_like_their_expansions(macro: str, expanded: str) -> None:
    after = "2026-02-27T10:17:00Z"
    assert fires(macro, after, 5, "Europe/London") == fires(expanded, after, 5, "Europe/London")


def test_macro_occurrences() -> None:
    assert fires("@weekly", "2026-01-01T00:00:00Z", 2) == [
        "2026-01-04T00:00:00Z",  # a Sunday
        "2026-01-11T00:00:00Z",
    ]
    assert fires("@yearly", "2026-01-01T00:00:00Z", 1) == ["2027-01-01T00:00:00Z"]


def test_names_are_case_insensitive_and_seven_is_sunday() -> None:
    # 2026-01-02 is a Friday.
    assert fires("0 9 * JAN Mon-Fri", "2026-01-02T10:00:00Z", 2) == [
        "2026-01-05T09:00:00Z",
        "2026-01-06T09:00:00Z",
    ]
    assert fires("0 0 * * 5-7", "2026-01-01T12:00:00Z", 4) == [
        "2026-01-02T00:00:00Z",  # Fri
        "2026-01-03T00:00:00Z",  # Sat
        "2026-01-04T00:00:00Z",  # Sun
        "2026-01-09T00:00:00Z",  # Fri
    ]
    assert fires("0 0 * * 7", "2026-01-01T00:00:00Z", 3) == fires(
        "0 0 * * sun", "2026-01-01T00:00:00Z", 3
    )


def test_steps_ranges_and_start_with_step() -> None:
    assert fires("10/25 * * * *", "2026-01-01T00:00:00Z", 3) == [
        "2026-01-01T00:10:00Z",
        "2026-01-01T00:35:00Z",
        "2026-01-01T01:10:00Z",
    ]
    assert fires("59/15 * * * *", "2026-01-01T00:00:00Z", 2) == [
        "2026-01-01T00:59:00Z",  # croniter 7 semantics: only :59
        "2026-01-01T01:59:00Z",
    ]
    assert fires("1-30/10 * * * *", "2026-01-01T00:00:00Z", 4) == [
        "2026-01-01T00:01:00Z",
        "2026-01-01T00:11:00Z",
        "2026-01-01T00:21:00Z",
        "2026-01-01T01:01:00Z",
    ]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # The 13th, or any Friday (classic cron); 2026-02-13 is itself a Friday.
    assert fires("0 0 13 * 5", "2026-02-01T00:00:00Z", 4) == [
        "2026-02-06T00:00:00Z",
        "2026-02-13T00:00:00Z",
        "2026-02-20T00:00:00Z",
        "2026-02-27T00:00:00Z",
    ]
    assert fires("0 0 13 * 5", "2026-02-28T00:00:00Z", 2) == [
        "2026-03-06T00:00:00Z",
        "2026-03-13T00:00:00Z",
    ]


def test_spec_keeps_the_text_and_compares_by_it() -> None:
    spec = parse_cron("*/5 * * * *", "Europe/London")
    assert isinstance(spec, CronSpec)
    assert (spec.expression, spec.timezone) == ("*/5 * * * *", "Europe/London")
    assert spec == parse_cron("*/5 * * * *", "Europe/London")
    assert spec != parse_cron("*/5 * * * *", "UTC")
    assert parse_cron("0 0 * * *").timezone == "UTC"


def test_occurrences_are_strictly_after_the_start() -> None:
    assert fires("0 * * * *", "2026-01-01T10:00:00Z", 1) == ["2026-01-01T11:00:00Z"]
    assert fires("0 * * * *", "2026-01-01T09:59:59.999Z", 1) == ["2026-01-01T10:00:00Z"]
    assert fires("* * * * * *", "2026-01-01T09:59:59.999Z", 2) == [
        "2026-01-01T10:00:00Z",
        "2026-01-01T10:00:01Z",
    ]


def test_generators_of_one_spec_are_independent_when_interleaved() -> None:
    # Generators share croniter's expansion of the expression; their positions must not.
    spec = parse_cron("*/20 * * * *", "Europe/London")
    early = occurrences_after(spec, parse_instant("2026-01-01T00:00:00Z"))
    late = occurrences_after(spec, parse_instant("2026-06-01T00:00:00Z"))
    pairs = [(format_instant(next(early)), format_instant(next(late))) for _ in range(3)]
    assert pairs == [
        ("2026-01-01T00:20:00Z", "2026-06-01T00:20:00Z"),
        ("2026-01-01T00:40:00Z", "2026-06-01T00:40:00Z"),
        ("2026-01-01T01:00:00Z", "2026-06-01T01:00:00Z"),
    ]


def test_a_valid_spec_is_parsed_once_and_shared_an_invalid_one_is_refused_every_time() -> None:
    """Creates parse one spec up to four times (validation, linter, first cursor, next
    runs) and a batch thousands of times: the parse is kept, keyed by everything that
    decides the occurrences."""
    first = parse_cron("17 3 * * *", "Europe/Berlin")
    assert parse_cron("17 3 * * *", "Europe/Berlin") is first
    assert parse_cron("17 3 * * *", "Europe/Berlin", dst_gap="skip") is not first
    assert parse_cron("17 3 * * *", "UTC") is not first
    for _ in range(2):
        with pytest.raises(ValidationError) as caught:
            parse_cron("61 3 * * *", "UTC")
        assert [e.field for e in caught.value.errors] == ["cron"]
    # Shared specs are never iterated themselves: two walks give the same occurrences.
    again = parse_cron("17 3 * * *", "Europe/Berlin")
    after = 1_790_000_000_000
    walks = [list(itertools.islice(occurrences_after(s, after), 3)) for s in (first, again)]
    assert walks[0] == walks[1] and len(walks[0]) == 3
