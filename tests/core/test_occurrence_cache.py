"""The occurrence cache answers exactly what ``parse_cron`` and ``occurrences_after``
answer — for any sequence of starts (forwards, backwards, across DST), with iterators
interleaved and held across other calls — and stays inside its bounds while doing so."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.cron import CronSpec, occurrences_after, parse_cron
from appliance.core.instants import format_scheduled_for, parse_instant
from appliance.core.occurrence_cache import CHUNK, OccurrenceCache
from appliance.errors import ValidationError
from tests.core.test_cron_properties import EXPRESSIONS, STARTS, ZONES, take, valid

SPECS = [
    parse_cron(expression, zone)
    for expression, zone in [
        ("30 2 * * *", "America/New_York"),  # fixed-time: gap shifted, fold once
        ("*/20 * * * *", "Europe/Berlin"),  # wildcard: gap skipped, fold twice
        ("*/7 * * * * *", "UTC"),  # every 7 s: the entry refills often
        ("0 0 29 2 *", "Australia/Sydney"),  # leap days only
        ("15 1 * * 0", "Australia/Lord_Howe"),  # a half-hour DST shift
        ("0 0 0 */2 * 1", "Europe/London"),  # both day fields: AND
    ]
]
# Around the 2026 DST changes in the United States (March 8, November 1) and Europe.
BASE = parse_instant("2026-03-07T00:00:00Z")
SPAN_MS = 250 * 86_400_000
TINY = {"max_specs": 3, "max_values": 40, "max_values_per_spec": 24, "max_texts": 4}


def expected(spec: CronSpec, after_ms: int, n: int) -> list[int]:
    return list(itertools.islice(occurrences_after(spec, after_ms), n))


def check_bounds(cache: OccurrenceCache, *, max_specs: int, max_values: int) -> None:
    assert len(cache) <= max_specs
    # The entry in use may pass the total by one chunk before the others make room.
    assert cache.values_held <= max_values + CHUNK


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(SPECS) - 1),
            st.integers(min_value=0, max_value=SPAN_MS),
            st.integers(min_value=1, max_value=3 * CHUNK),
        ),
        min_size=1,
        max_size=12,
    ),
    tiny=st.booleans(),
)
def test_any_sequence_of_starts_gets_the_direct_answer(
    steps: list[tuple[int, int, int]], tiny: bool
) -> None:
    cache = OccurrenceCache(**TINY) if tiny else OccurrenceCache()
    for index, offset, n in steps:
        spec = SPECS[index]
        after_ms = BASE + offset
        assert list(itertools.islice(cache.after(spec, after_ms), n)) == expected(spec, after_ms, n)
        if tiny:
            check_bounds(cache, max_specs=3, max_values=40)


@settings(max_examples=150, deadline=None)
@given(
    EXPRESSIONS,
    st.sampled_from(ZONES),
    STARTS,
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 30)), min_size=1, max_size=10),
    st.booleans(),
)
def test_interleaved_iterators_each_see_the_private_sequence(
    expression: str,
    zone: str,
    after_ms: int,
    moves: list[tuple[int, int]],
    tiny: bool,
) -> None:
    """Three readers of one spec (two from one start, one from a later occurrence) advance
    in any order, as schedules sharing a cursor do within a planner pass."""
    spec = valid(expression, zone)
    wanted = take(spec, after_ms, 200)
    cache = OccurrenceCache(**TINY) if tiny else OccurrenceCache()
    starts = [after_ms, after_ms, wanted[5]]
    readers = [cache.after(spec, start) for start in starts]
    seen: list[list[int]] = [[], [], []]
    for reader, n in moves:
        seen[reader].extend(itertools.islice(readers[reader], n))
    for reader, start in enumerate(starts):
        assert seen[reader] == take(spec, start, len(seen[reader]))


def test_moving_forward_second_by_second_and_back() -> None:
    cache = OccurrenceCache()
    spec = parse_cron("*/3 * * * * *", "UTC")
    instants = [BASE + k * 1000 for k in range(200)] + [BASE - 5_000, BASE + 7_500]
    for after_ms in instants:
        assert list(itertools.islice(cache.after(spec, after_ms), 6)) == expected(spec, after_ms, 6)


def test_a_catch_up_of_one_schedule_is_read_again_by_the_next_from_the_cache() -> None:
    cache = OccurrenceCache()
    spec = parse_cron("* * * * * *", "UTC")
    first = list(itertools.islice(cache.after(spec, BASE), 5_000))
    held = cache.values_held
    second = list(itertools.islice(cache.after(spec, BASE), 5_000))
    assert first == second == expected(spec, BASE, 5_000)
    assert cache.values_held == held  # nothing computed again


def test_one_long_reader_stays_inside_the_per_spec_bound() -> None:
    cache = OccurrenceCache(max_values_per_spec=100)
    spec = parse_cron("* * * * * *", "UTC")
    assert list(itertools.islice(cache.after(spec, BASE), 1_000)) == expected(spec, BASE, 1_000)
    assert cache.values_held <= 100


def test_the_least_recently_used_spec_is_dropped_past_the_bound() -> None:
    cache = OccurrenceCache(max_specs=3)
    specs = [parse_cron(f"{minute} * * * *", "UTC") for minute in range(5)]
    for spec in specs:
        next(cache.after(spec, BASE))
    assert len(cache) == 3
    next(cache.after(specs[2], BASE))  # used again: stays
    next(cache.after(specs[0], BASE))  # back in, drops the oldest (specs[3])
    assert len(cache) == 3
    assert next(cache.after(specs[3], BASE)) == expected(specs[3], BASE, 1)[0]


def test_many_distinct_specs_and_instants_stay_bounded() -> None:
    cache = OccurrenceCache(max_specs=50, max_values=300, max_texts=20)
    for second in range(60):
        for minute in range(10):
            spec = cache.spec(f"{second} {minute} * * * *", "UTC")
            for value in itertools.islice(cache.after(spec, BASE), 10):
                cache.text(value)
    check_bounds(cache, max_specs=50, max_values=300)
    assert len(cache._specs) == 50
    assert len(cache._texts) == 20


def test_a_spec_is_parsed_once_and_an_invalid_one_is_never_kept() -> None:
    cache = OccurrenceCache()
    assert cache.spec("0 3 * * *", "Europe/Berlin") is cache.spec("0 3 * * *", "Europe/Berlin")
    assert cache.spec("0 3 * * *", "UTC") == parse_cron("0 3 * * *", "UTC")
    for _ in range(2):
        with pytest.raises(ValidationError):
            cache.spec("0 3 * *", "UTC")
    assert list(cache._specs) == [
        ("0 3 * * *", "Europe/Berlin", None, None),
        ("0 3 * * *", "UTC", None, None),
    ]


def test_texts_are_the_canonical_form() -> None:
    cache = OccurrenceCache(max_texts=2)
    for ms in (BASE, BASE + 1000, BASE, BASE + 2000):
        assert cache.text(ms) == format_scheduled_for(ms)


def test_a_spec_that_stops_firing_ends_its_iterators() -> None:
    cache = OccurrenceCache()
    spec = parse_cron("0 0 29 2 */7", "UTC")  # 29 February on a Sunday: last 9976
    after = parse_instant("9900-01-01T00:00:00Z")
    assert list(cache.after(spec, after)) == list(occurrences_after(spec, after))
    assert list(cache.after(spec, parse_instant("9977-01-01T00:00:00Z"))) == []
