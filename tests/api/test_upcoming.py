"""The app-wide occurrence cache answers exactly what ``occurrences_after`` answers, at any
sequence of instants (forwards, backwards, across DST), and stays bounded."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.api import upcoming
from appliance.api.upcoming import UpcomingOccurrences
from appliance.core.cron import CronSpec, occurrences_after, parse_cron
from appliance.core.instants import parse_instant

from .conftest import Api, FakeClock

SPECS = [
    parse_cron(expression, zone)
    for expression, zone in [
        ("30 2 * * *", "America/New_York"),  # fixed-time: gap shifted, fold once
        ("*/20 * * * *", "Europe/Berlin"),  # wildcard: gap skipped, fold twice
        ("*/7 * * * * *", "UTC"),  # every 7 s: the cache refills often
        ("0 0 29 2 *", "Australia/Sydney"),  # leap days only
        ("15 1 * * 0", "Australia/Lord_Howe"),  # a half-hour DST shift
        ("@hourly", "Asia/Kolkata"),
    ]
]
# Around the 2026 DST changes in the United States (March 8, November 1) and Europe.
BASE = parse_instant("2026-03-07T00:00:00Z")
SPAN_MS = 250 * 86_400_000


def expected(spec: CronSpec, after_ms: int, n: int) -> list[int]:
    return list(itertools.islice(occurrences_after(spec, after_ms), n))


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(SPECS) - 1),
            st.integers(min_value=0, max_value=SPAN_MS),
            st.integers(min_value=1, max_value=upcoming.WINDOW + 8),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_any_sequence_of_instants_gets_the_direct_answer(
    steps: list[tuple[int, int, int]],
) -> None:
    cache = UpcomingOccurrences()
    for index, offset, n in steps:
        spec = SPECS[index]
        after_ms = BASE + offset
        assert list(itertools.islice(cache.after(spec, after_ms), n)) == expected(spec, after_ms, n)


def test_moving_forward_second_by_second_and_back() -> None:
    cache = UpcomingOccurrences()
    spec = parse_cron("*/3 * * * * *", "UTC")
    instants = [BASE + k * 1000 for k in range(200)] + [BASE - 5_000, BASE + 7_500]
    for after_ms in instants:
        got = list(itertools.islice(cache.after(spec, after_ms), 6))
        assert got == expected(spec, after_ms, 6)


def test_the_least_recently_used_spec_is_dropped_past_the_bound() -> None:
    cache = UpcomingOccurrences(max_specs=3)
    specs = [parse_cron(f"{minute} * * * *", "UTC") for minute in range(5)]
    for spec in specs:
        next(cache.after(spec, BASE))
    assert len(cache) == 3
    next(cache.after(specs[2], BASE))  # used again: stays
    next(cache.after(specs[0], BASE))  # back in, drops the oldest (specs[3])
    assert len(cache) == 3
    assert next(cache.after(specs[3], BASE)) == expected(specs[3], BASE, 1)[0]


async def test_next_runs_follow_the_clock_across_requests(api: Api, clock: FakeClock) -> None:
    created = await api.create(cron="*/5 * * * * *", jitter_seconds=2)
    for _ in range(12):
        clock.advance(3_700)  # past one or two occurrences per step
        listed = await api.call("GET", "/v1/schedules")
        one = await api.call("GET", f"/v1/schedules/{created['id']}")
        assert listed.body["items"][0]["next_runs"] == one.body["next_runs"]
        scheduled = [parse_instant(r["scheduled_for"]) for r in one.body["next_runs"]]
        assert scheduled == expected(parse_cron("*/5 * * * * *"), clock.now, 5)
        assert all(
            0 <= parse_instant(r["due_at"]) - parse_instant(r["scheduled_for"]) < 2_000
            for r in one.body["next_runs"]
        )
