"""Golden DST tables (ADR 0037) for America/New_York, Europe/London and Australia/Lord_Howe.

Every expected instant below is written out by hand from the 2026 transitions, which the
first test checks against the zone database:

- America/New_York: 2026-03-08 02:00 EST → 03:00 EDT at 07:00Z (gap 02:00–02:59);
  2026-11-01 02:00 EDT → 01:00 EST at 06:00Z (fold 01:00–01:59: 05:xxZ, then 06:xxZ).
- Europe/London: 2026-03-29 01:00 GMT → 02:00 BST at 01:00Z (gap 01:00–01:59);
  2026-10-25 02:00 BST → 01:00 GMT at 01:00Z (fold 01:00–01:59: 00:xxZ, then 01:xxZ).
- Australia/Lord_Howe (a 30-minute shift, +10:30 ↔ +11:00): 2026-10-04 02:00 → 02:30 at
  2026-10-03T15:30Z (gap 02:00–02:29); 2026-04-05 02:00 → 01:30 at 2026-04-04T15:00Z
  (fold 01:30–01:59: 14:3x/14:4xZ, then 15:0x/15:1xZ).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from appliance.core.cron import local_wall_time, occurrences_after, parse_cron
from appliance.core.instants import format_instant, parse_instant

NEW_YORK = "America/New_York"
LONDON = "Europe/London"
LORD_HOWE = "Australia/Lord_Howe"


def fires(expression: str, timezone: str, after: str, count: int) -> list[str]:
    """The first ``count`` occurrences after ``after`` as UTC text."""
    spec = parse_cron(expression, timezone)
    found = itertools.islice(occurrences_after(spec, parse_instant(after)), count)
    return [format_instant(ms) for ms in found]


def fires_between(expression: str, timezone: str, start: str, end: str) -> list[str]:
    """Occurrences in [start, end) as UTC text."""
    spec = parse_cron(expression, timezone)
    end_ms = parse_instant(end)
    found = itertools.takewhile(
        lambda ms: ms < end_ms, occurrences_after(spec, parse_instant(start) - 1)
    )
    return [format_instant(ms) for ms in found]


def hours(start: str, count: int, step_minutes: int = 60) -> list[str]:
    """``count`` consecutive UTC instants ``step_minutes`` apart, as text."""
    first = datetime.fromisoformat(start.replace("Z", "+00:00"))
    step = timedelta(minutes=step_minutes)
    return [(first + i * step).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(count)]


@pytest.mark.parametrize(
    ("zone", "instant", "before", "after"),
    [
        (NEW_YORK, "2026-03-08T07:00:00Z", -5 * 60, -4 * 60),
        (NEW_YORK, "2026-11-01T06:00:00Z", -4 * 60, -5 * 60),
        (LONDON, "2026-03-29T01:00:00Z", 0, 60),
        (LONDON, "2026-10-25T01:00:00Z", 60, 0),
        (LORD_HOWE, "2026-10-03T15:30:00Z", 630, 660),
        (LORD_HOWE, "2026-04-04T15:00:00Z", 660, 630),
    ],
)
def test_the_tables_rest_on_the_real_2026_transitions(
    zone: str, instant: str, before: int, after: int
) -> None:
    moment = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    tz = ZoneInfo(zone)
    assert (moment - timedelta(seconds=1)).astimezone(tz).utcoffset() == timedelta(minutes=before)
    assert moment.astimezone(tz).utcoffset() == timedelta(minutes=after)
    assert moment.tzinfo is UTC


# --- America/New_York ---------------------------------------------------------------------


def test_new_york_fixed_time_in_the_gap_fires_once_at_the_gap_end() -> None:
    assert fires("30 2 * * *", NEW_YORK, "2026-03-07T00:00:00Z", 3) == [
        "2026-03-07T07:30:00Z",  # 02:30 EST
        "2026-03-08T07:00:00Z",  # 02:30 does not exist: 03:00 EDT
        "2026-03-09T06:30:00Z",  # 02:30 EDT
    ]


def test_new_york_gap_time_shifted_onto_a_real_occurrence_fires_once() -> None:
    assert fires_between(
        "0,30 2,3 * * *", NEW_YORK, "2026-03-07T00:00:00Z", "2026-03-09T00:00:00Z"
    ) == [
        "2026-03-07T07:00:00Z",
        "2026-03-07T07:30:00Z",
        "2026-03-07T08:00:00Z",
        "2026-03-07T08:30:00Z",
        "2026-03-08T07:00:00Z",  # 02:00, 02:30 and 03:00 EDT: one instant, fired once
        "2026-03-08T07:30:00Z",  # 03:30 EDT
    ]


def test_new_york_fixed_time_in_the_fold_fires_once_at_the_earlier_instant() -> None:
    assert fires("30 1 * * *", NEW_YORK, "2026-10-31T00:00:00Z", 3) == [
        "2026-10-31T05:30:00Z",  # 01:30 EDT
        "2026-11-01T05:30:00Z",  # 01:30 EDT (the earlier of 05:30Z and 06:30Z)
        "2026-11-02T06:30:00Z",  # 01:30 EST
    ]


def test_new_york_fixed_time_starting_inside_the_fold() -> None:
    # From 01:10 EDT (first pass): 01:30 EDT is still ahead.
    assert fires("0,30 1 * * *", NEW_YORK, "2026-11-01T05:10:00Z", 2) == [
        "2026-11-01T05:30:00Z",
        "2026-11-02T06:00:00Z",
    ]
    # From 01:10 EST (second pass): 01:30 already fired at 05:30Z; the next is tomorrow.
    assert fires("0,30 1 * * *", NEW_YORK, "2026-11-01T06:10:00Z", 1) == ["2026-11-02T06:00:00Z"]


def test_new_york_hourly_fires_23_times_on_the_short_day() -> None:
    day = fires_between("0 * * * *", NEW_YORK, "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z")
    assert len(day) == 23
    assert day[:4] == [
        "2026-03-08T05:00:00Z",  # 00:00 EST
        "2026-03-08T06:00:00Z",  # 01:00 EST
        "2026-03-08T07:00:00Z",  # 03:00 EDT (02:00 does not exist: nothing fires for it)
        "2026-03-08T08:00:00Z",  # 04:00 EDT
    ]
    assert day[-1] == "2026-03-09T03:00:00Z"  # 23:00 EDT
    assert day == hours("2026-03-08T05:00:00Z", 23)


def test_new_york_hourly_fires_25_times_on_the_long_day() -> None:
    day = fires_between("0 * * * *", NEW_YORK, "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z")
    assert len(day) == 25
    assert day[:4] == [
        "2026-11-01T04:00:00Z",  # 00:00 EDT
        "2026-11-01T05:00:00Z",  # 01:00 EDT
        "2026-11-01T06:00:00Z",  # 01:00 EST
        "2026-11-01T07:00:00Z",  # 02:00 EST
    ]
    assert day == hours("2026-11-01T04:00:00Z", 25)


def test_new_york_quarter_hours_skip_the_gap_and_repeat_the_fold() -> None:
    assert fires("*/15 * * * *", NEW_YORK, "2026-03-08T06:30:00Z", 3) == [
        "2026-03-08T06:45:00Z",  # 01:45 EST
        "2026-03-08T07:00:00Z",  # 03:00 EDT; 02:00–02:45 are skipped, not shifted
        "2026-03-08T07:15:00Z",
    ]
    assert fires("*/15 * * * *", NEW_YORK, "2026-11-01T05:40:00Z", 5) == [
        "2026-11-01T05:45:00Z",  # 01:45 EDT
        "2026-11-01T06:00:00Z",  # 01:00 EST
        "2026-11-01T06:15:00Z",
        "2026-11-01T06:30:00Z",
        "2026-11-01T06:45:00Z",
    ]
    # Starting in the fold's second pass: the second 01:15 is next.
    assert fires("*/15 * * * *", NEW_YORK, "2026-11-01T06:10:00Z", 1) == ["2026-11-01T06:15:00Z"]
    # Every second, starting half a second into 01:10:00 EST: 01:10:00 EST is not after it.
    assert fires("* * * * * *", NEW_YORK, "2026-11-01T06:10:00.500Z", 2) == [
        "2026-11-01T06:10:01Z",
        "2026-11-01T06:10:02Z",
    ]


def test_new_york_wildcard_minutes_in_the_missing_hour_do_not_fire() -> None:
    assert fires("*/15 2 * * *", NEW_YORK, "2026-03-07T07:40:00Z", 2) == [
        "2026-03-07T07:45:00Z",  # 02:45 EST on the 7th
        "2026-03-09T06:00:00Z",  # 02:00 EDT on the 9th: nothing on the 8th
    ]


# --- Europe/London ------------------------------------------------------------------------


def test_london_fixed_time_across_both_transitions() -> None:
    assert fires("30 1 * * *", LONDON, "2026-03-28T00:00:00Z", 3) == [
        "2026-03-28T01:30:00Z",  # 01:30 GMT
        "2026-03-29T01:00:00Z",  # 01:30 does not exist: 02:00 BST
        "2026-03-30T00:30:00Z",  # 01:30 BST
    ]
    assert fires("30 1 * * *", LONDON, "2026-10-24T00:00:00Z", 3) == [
        "2026-10-24T00:30:00Z",  # 01:30 BST
        "2026-10-25T00:30:00Z",  # 01:30 BST, the earlier of 00:30Z and 01:30Z
        "2026-10-26T01:30:00Z",  # 01:30 GMT
    ]


def test_london_hourly_short_and_long_days() -> None:
    short = fires_between("0 * * * *", LONDON, "2026-03-29T00:00:00Z", "2026-03-29T23:00:00Z")
    assert len(short) == 23
    assert short[:3] == ["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"]
    long = fires_between("0 * * * *", LONDON, "2026-10-24T23:00:00Z", "2026-10-26T00:00:00Z")
    assert len(long) == 25
    assert long[:4] == [
        "2026-10-24T23:00:00Z",  # 00:00 BST
        "2026-10-25T00:00:00Z",  # 01:00 BST
        "2026-10-25T01:00:00Z",  # 01:00 GMT
        "2026-10-25T02:00:00Z",  # 02:00 GMT
    ]
    assert long == hours("2026-10-24T23:00:00Z", 25)


def test_london_midnight_is_untouched_by_both_transitions() -> None:
    assert fires("@midnight", LONDON, "2026-03-28T12:00:00Z", 3) == [
        "2026-03-29T00:00:00Z",
        "2026-03-29T23:00:00Z",
        "2026-03-30T23:00:00Z",
    ]
    assert fires("@daily", LONDON, "2026-10-24T12:00:00Z", 3) == [
        "2026-10-24T23:00:00Z",
        "2026-10-26T00:00:00Z",
        "2026-10-27T00:00:00Z",
    ]


def test_london_seconds_follow_the_minute_rule() -> None:
    # Fixed time with a seconds list: every second of 01:30:xx shifts to the gap end, once.
    assert fires("0,30 30 1 * * *", LONDON, "2026-03-29T00:00:00Z", 2) == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]
    # Wildcard minute: the seconds in the missing hour are skipped like the minutes.
    assert fires("30 * 1 * * *", LONDON, "2026-03-29T00:58:00Z", 2) == [
        "2026-03-30T00:00:30Z",  # 01:00:30 BST next day; nothing in the gap
        "2026-03-30T00:01:30Z",
    ]
    # ... and fire twice in the repeated hour.
    assert fires("0 30 * * * *", LONDON, "2026-10-25T00:00:00Z", 3) == [
        "2026-10-25T00:30:00Z",  # 01:30 BST
        "2026-10-25T01:30:00Z",  # 01:30 GMT
        "2026-10-25T02:30:00Z",
    ]


# --- Australia/Lord_Howe (30-minute shift) --------------------------------------------------


def test_lord_howe_fixed_time_in_the_half_hour_gap() -> None:
    assert fires("15 2 * * *", LORD_HOWE, "2026-10-02T00:00:00Z", 3) == [
        "2026-10-02T15:45:00Z",  # 02:15 +10:30
        "2026-10-03T15:30:00Z",  # 02:15 does not exist: 02:30 +11:00
        "2026-10-04T15:15:00Z",  # 02:15 +11:00
    ]
    assert fires("0,30 2 * * *", LORD_HOWE, "2026-10-02T00:00:00Z", 5) == [
        "2026-10-02T15:30:00Z",  # 02:00 +10:30
        "2026-10-02T16:00:00Z",  # 02:30 +10:30
        "2026-10-03T15:30:00Z",  # 02:00 shifted to 02:30 +11:00, which is also 02:30: once
        "2026-10-04T15:00:00Z",  # 02:00 +11:00
        "2026-10-04T15:30:00Z",  # 02:30 +11:00
    ]


def test_lord_howe_fixed_time_in_the_half_hour_fold() -> None:
    assert fires("45 1 * * *", LORD_HOWE, "2026-04-03T00:00:00Z", 3) == [
        "2026-04-03T14:45:00Z",  # 01:45 +11:00
        "2026-04-04T14:45:00Z",  # 01:45 +11:00, the earlier of 14:45Z and 15:15Z
        "2026-04-05T15:15:00Z",  # 01:45 +10:30
    ]


def test_lord_howe_wildcards_across_the_half_hour_shifts() -> None:
    # Short day (23.5 h): 02:00 does not exist, so the hourly spec fires 23 times.
    short = fires_between("0 * * * *", LORD_HOWE, "2026-10-03T13:30:00Z", "2026-10-04T13:00:00Z")
    assert len(short) == 23
    assert short[1:3] == [
        "2026-10-03T14:30:00Z",  # 01:00 +10:30
        "2026-10-03T16:00:00Z",  # 03:00 +11:00 (02:00 skipped)
    ]
    # Long day (24.5 h): the half-past spec meets the repeated 01:30 twice: 25 times.
    long = fires_between("30 * * * *", LORD_HOWE, "2026-04-04T13:00:00Z", "2026-04-05T13:30:00Z")
    assert len(long) == 25
    assert long[:4] == [
        "2026-04-04T13:30:00Z",  # 00:30 +11:00
        "2026-04-04T14:30:00Z",  # 01:30 +11:00
        "2026-04-04T15:00:00Z",  # 01:30 +10:30
        "2026-04-04T16:00:00Z",  # 02:30 +10:30
    ]
    assert long[-1] == "2026-04-05T13:00:00Z"  # 23:30 +10:30
    assert fires("*/15 * * * *", LORD_HOWE, "2026-10-03T15:00:00Z", 3) == [
        "2026-10-03T15:15:00Z",  # 01:45 +10:30
        "2026-10-03T15:30:00Z",  # 02:30 +11:00 (02:00 and 02:15 skipped)
        "2026-10-03T15:45:00Z",
    ]
    assert fires("*/15 * * * *", LORD_HOWE, "2026-04-04T14:40:00Z", 4) == [
        "2026-04-04T14:45:00Z",  # 01:45 +11:00
        "2026-04-04T15:00:00Z",  # 01:30 +10:30
        "2026-04-04T15:15:00Z",  # 01:45 +10:30
        "2026-04-04T15:30:00Z",  # 02:00 +10:30
    ]


# --- previews ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instant", "zone", "expected"),
    [
        ("2026-03-08T06:59:59Z", NEW_YORK, ("2026-03-08T01:59:59", "-05:00")),
        ("2026-03-08T07:00:00Z", NEW_YORK, ("2026-03-08T03:00:00", "-04:00")),
        ("2026-11-01T05:30:00Z", NEW_YORK, ("2026-11-01T01:30:00", "-04:00")),
        ("2026-11-01T06:30:00Z", NEW_YORK, ("2026-11-01T01:30:00", "-05:00")),
        ("2026-10-03T15:30:00Z", LORD_HOWE, ("2026-10-04T02:30:00", "+11:00")),
        ("2026-04-04T15:00:00Z", LORD_HOWE, ("2026-04-05T01:30:00", "+10:30")),
        ("2026-08-06T03:00:00.250Z", "Asia/Kolkata", ("2026-08-06T08:30:00.250", "+05:30")),
        ("2026-08-06T03:00:00Z", "UTC", ("2026-08-06T03:00:00", "+00:00")),
    ],
)
def test_local_wall_time(instant: str, zone: str, expected: tuple[str, str]) -> None:
    assert local_wall_time(parse_instant(instant), zone) == expected
