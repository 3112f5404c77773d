"""Day of month and day of week, as Linux crontabs and crontab.guru count them (ADR 0037).

A day field starting with ``*`` is unrestricted; when either is, a day must match both
fields (AND), otherwise either (OR). Goldens for both directions in six-field
(seconds-first) and five-field form, then a property against the independent matcher of
``tests/core/cron_oracle.py`` over random day fields in several zones.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.cron import day_rule, occurrences_after, parse_cron
from appliance.core.instants import format_instant, parse_instant
from appliance.errors import ValidationError
from tests.core.cron_oracle import oracle
from tests.core.test_cron_properties import EARLIEST, LATEST, field, valid

AUGUST = "2026-07-31T23:59:59Z"


def fires(expression: str, count: int, timezone: str = "UTC", after: str = AUGUST) -> list[str]:
    spec = parse_cron(expression, timezone)
    found = itertools.islice(occurrences_after(spec, parse_instant(after)), count)
    return [format_instant(ms) for ms in found]


def midnights(*days: str) -> list[str]:
    return [f"{day}T00:00:00Z" for day in days]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # AND: `*/2` starts with `*`, so odd days of month that are also Mondays.
        (
            "0 0 0 */2 * 1",
            midnights("2026-08-03", "2026-08-17", "2026-08-31", "2026-09-07", "2026-09-21"),
        ),
        ("0 0 */2 * 1", midnights("2026-08-03", "2026-08-17", "2026-08-31", "2026-09-07")),
        # AND: the 15th when it is a Sunday, Wednesday or Saturday (`*/3` = 0,3,6).
        (
            "0 0 0 15 * */3",
            midnights("2026-08-15", "2026-11-15", "2027-05-15", "2027-08-15", "2027-09-15"),
        ),
        ("0 0 15 * */3", midnights("2026-08-15", "2026-11-15", "2027-05-15")),
        # OR: both day fields restricted, so the 1st, the 15th and every Friday.
        (
            "0 0 0 1,15 * 5",
            midnights(
                "2026-08-01", "2026-08-07", "2026-08-14", "2026-08-15", "2026-08-21", "2026-08-28"
            ),
        ),
        ("0 0 1,15 * fri", midnights("2026-08-01", "2026-08-07", "2026-08-14", "2026-08-15")),
        # AND at its sparsest: 29 February on a Sunday, 28 years apart.
        ("0 0 0 29 2 */7", midnights("2032-02-29", "2060-02-29", "2088-02-29")),
        # 1 February on a Monday: eleven years apart here, past the old 5-year search
        # that decided whether a spec can fire at all (from 2000 the first is 2010).
        ("0 0 0 */29 2 1", midnights("2027-02-01", "2038-02-01", "2044-02-01")),
        # A bare `*` in either field leaves the other to decide alone, as before.
        ("0 0 0 * * 1", midnights("2026-08-03", "2026-08-10", "2026-08-17")),
        ("0 0 0 */10 * *", midnights("2026-08-01", "2026-08-11", "2026-08-21", "2026-08-31")),
    ],
)
def test_day_fields_combine_as_vixie_cron_does(expression: str, expected: list[str]) -> None:
    assert fires(expression, len(expected)) == expected


def test_the_day_rule_applies_to_local_days_in_the_schedules_zone() -> None:
    # 07:00Z on 2026-08-03 is 09:00 on a Monday in Berlin (UTC+2 in summer).
    found = fires("0 0 9 */2 * 1", 3, "Europe/Berlin")
    assert found == ["2026-08-03T07:00:00Z", "2026-08-17T07:00:00Z", "2026-08-31T07:00:00Z"]


@pytest.mark.parametrize(
    "expression", ["0 0 1,* * 1", "0 0 1 * 1,*", "0 0 0 1,2,* * mon", "0 0 1,*/1 * 0,*/2"]
)
def test_a_star_item_after_the_first_item_of_a_day_field_is_refused(expression: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_cron(expression)
    assert {error.field for error in caught.value.errors} == {"cron"}
    for error in caught.value.errors:
        assert "* may only start a day field (it makes the field unrestricted)" in error.message


@pytest.mark.parametrize(
    ("expression", "rule"),
    [
        (
            "0 0 0 */2 * 1",
            "both: a day fires only if its day of month matches */2 and its day of week matches"
            " 1 (day of month starts with *, so the fields combine with AND, as in Vixie cron"
            " and crontab.guru)",
        ),
        (
            "0 0 15 * */3",
            "both: a day fires only if its day of month matches 15 and its day of week matches"
            " */3 (day of week starts with *, so the fields combine with AND, as in Vixie cron"
            " and crontab.guru)",
        ),
        (
            "0 0 1,15 * FRI",
            "either: a day fires if its day of month matches 1,15 or its day of week matches"
            " fri (both day fields are restricted, so they combine with OR, as in Vixie cron"
            " and crontab.guru)",
        ),
        ("0 0 * * 1", None),
        ("0 0 1 * *", None),
        ("@weekly", None),
    ],
)
def test_day_rule_says_in_words_how_two_given_day_fields_combine(
    expression: str, rule: str | None
) -> None:
    assert day_rule(parse_cron(expression)) == rule


# Zones without a transition at the hours generated below (0 and 4–23 local): each
# matching local day then has exactly one instant per matching time, so days decide alone.
DAY_ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Tokyo"]
DAY_FIELDS = st.tuples(
    st.one_of(field(1, 31), st.just("*")),
    st.one_of(st.just("*"), field(1, 12, favourites=(2,))),
    st.one_of(field(0, 7), st.just("*")),
)
TIMES = st.tuples(st.sampled_from([0, 30]), st.integers(0, 59), st.sampled_from([0, *range(4, 24)]))
WINDOW_DAYS = 800


@settings(max_examples=150, deadline=None)
@given(DAY_FIELDS, TIMES, st.booleans(), st.sampled_from(DAY_ZONES), st.integers(EARLIEST, LATEST))
def test_occurrences_fall_on_the_days_an_independent_matcher_picks(
    days: tuple[str, str, str],
    time: tuple[int, int, int],
    seconds_first: bool,
    zone: str,
    after_ms: int,
) -> None:
    second, minute, hour = time
    expression = f"{minute} {hour} {' '.join(days)}"
    if seconds_first:
        expression = f"{second} {expression}"
    spec = valid(expression, zone)
    tz = ZoneInfo(zone)
    start = datetime.fromtimestamp(after_ms / 1000, tz=UTC).astimezone(tz)
    end_ms = after_ms + WINDOW_DAYS * 86_400_000
    found = set(itertools.takewhile(lambda ms: ms < end_ms, occurrences_after(spec, after_ms)))
    matcher = oracle(expression)
    expected = set()
    for offset in range(-1, WINDOW_DAYS + 2):
        day = start.date() + timedelta(days=offset)
        if matcher.matches_day(day):
            local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
            ms = int(local.replace(second=second if seconds_first else 0).timestamp()) * 1000
            if after_ms < ms < end_ms:
                expected.add(ms)
    assert found == expected
