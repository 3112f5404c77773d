"""Schedule kinds and bounds as pure functions (``core.timing``), against oracles written
from docs/schedules.md rather than from the code."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.cron import END_MS
from appliance.core.instants import parse_instant
from appliance.core.json_fields import FieldReader
from appliance.core.timing import (
    MAX_EVERY_SECONDS,
    ScheduleKind,
    default_anchor,
    first_after,
    format_every,
    kind_of,
    occurrences,
    parse_every,
)
from appliance.core.timing_input import TimingInput, read_timing

T0 = parse_instant("2026-03-29T00:00:00Z")  # Europe's spring-forward day


def timing(**fields: Any) -> TimingInput:
    values: dict[str, Any] = {
        "cron": "",
        "timezone": "UTC",
        "at": None,
        "every_seconds": None,
        "start_at": None,
        "end_at": None,
    }
    values.update(fields)
    return TimingInput(**values)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86_400), ("1s", 1)]
)
def test_every_reads_a_number_and_a_unit(text: str, seconds: int) -> None:
    assert parse_every(text) == seconds
    assert parse_every(format_every(seconds)) == seconds


@pytest.mark.parametrize("text", ["0s", "15", "m", "1.5h", " 15m", "15M", "-1s", "1w", "01m"])
def test_every_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\."):
        parse_every(text)


def test_format_every_picks_the_largest_unit() -> None:
    assert [format_every(s) for s in (90, 120, 7200, 86_400, 86_401)] == [
        "90s",
        "2m",
        "2h",
        "1d",
        "86401s",
    ]


def test_an_interval_is_counted_in_utc_across_a_dst_change() -> None:
    hourly = timing(every_seconds=3600, start_at=T0, timezone="Europe/Berlin")
    got = list(itertools.islice(occurrences(hourly, after_ms=T0 - 1), 4))
    assert got == [T0 + h * 3_600_000 for h in range(4)]  # 01:00 UTC is the shift: no gap


@given(
    anchor_s=st.integers(0, 4_000_000_000),
    period=st.integers(1, MAX_EVERY_SECONDS),
    after_offset=st.integers(-(10**9), 10**10),
)
def test_interval_occurrences_are_the_anchor_plus_whole_periods_after_the_start(
    anchor_s: int, period: int, after_offset: int
) -> None:
    anchor = anchor_s * 1000
    after = anchor + after_offset
    got = list(
        itertools.islice(
            occurrences(timing(every_seconds=period, start_at=anchor), after_ms=after), 3
        )
    )
    assert got, "an interval fires until year 9999"
    for ms in got:
        assert ms > after and ms >= anchor and (ms - anchor) % (period * 1000) == 0
    first = got[0]
    assert first - period * 1000 <= max(after, anchor - 1)  # no occurrence skipped
    assert got == sorted(set(got))


@given(
    at_s=st.integers(0, 4_000_000_000),
    after_offset=st.integers(-(10**6), 10**6),
)
def test_a_one_off_has_exactly_one_occurrence(at_s: int, after_offset: int) -> None:
    at = at_s * 1000
    after = at + after_offset
    got = list(occurrences(timing(at=at), after_ms=after))
    assert got == ([at] if at > after else [])


@settings(max_examples=50, deadline=None)
@given(
    start_s=st.integers(1_700_000_000, 1_900_000_000),
    length_s=st.integers(0, 5 * 86_400),
    after_offset_s=st.integers(-86_400, 86_400),
    cron=st.sampled_from(["*/7 * * * *", "0 * * * *", "30 2 * * *"]),
)
def test_bounds_keep_exactly_the_occurrences_inside_them(
    start_s: int, length_s: int, after_offset_s: int, cron: str
) -> None:
    start, end = start_s * 1000, (start_s + length_s) * 1000
    after = start + after_offset_s * 1000
    unbounded = occurrences(timing(cron=cron), after_ms=after)
    wanted = [ms for ms in itertools.takewhile(lambda ms: ms <= end, unbounded) if ms >= start]
    bounded = occurrences(timing(cron=cron, start_at=start, end_at=end), after_ms=after)
    assert list(bounded) == wanted


def test_kind_and_first_after() -> None:
    assert kind_of(timing(cron="0 * * * *")) is ScheduleKind.CRON
    assert kind_of(timing(at=T0)) is ScheduleKind.AT
    assert kind_of(timing(every_seconds=5, start_at=T0)) is ScheduleKind.EVERY
    assert first_after(timing(at=T0), T0) is None
    assert first_after(timing(at=T0), T0 - 1) == T0
    assert first_after(timing(cron="0 * * * *", end_at=T0 + 1000), T0) is None
    assert default_anchor(T0 + 999) == T0
    last = list(occurrences(timing(every_seconds=MAX_EVERY_SECONDS, start_at=T0), after_ms=T0))
    assert last[-1] < END_MS  # the interval ends before year 9999, like a cron


def read(obj: dict[str, Any]) -> tuple[TimingInput, list[str]]:
    fields = FieldReader(obj)
    result = read_timing(fields)
    return result, [error.field for error in fields.errors]


def test_exactly_one_kind_names_the_fields() -> None:
    assert read({})[1] == ["cron"]
    assert read({"cron": "* * * * *", "every": "1m"})[1] == ["every"]
    assert read({"at": "2026-03-29T00:00:00Z", "every_seconds": 5})[1] == ["every_seconds"]
    assert read({"cron": None, "every": "1m"})[1] == []  # null is absent
    parsed, problems = read({"every": "90s", "start_at": "2026-03-29T01:00:00+01:00"})
    assert problems == [] and (parsed.every_seconds, parsed.start_at) == (90, T0)


def test_instants_need_an_offset_a_whole_second_and_an_order() -> None:
    assert read({"at": "2026-03-29T00:00:00"})[1] == ["at"]
    assert read({"at": "2026-03-29T00:00:00.250Z"})[1] == ["at"]
    assert read({"at": "9999-06-01T00:00:00Z"})[1] == ["at"]
    later_start = {
        "cron": "* * * * *",
        "start_at": "2026-03-30T00:00:00Z",
        "end_at": "2026-03-29T00:00:00Z",
    }
    assert read(later_start)[1] == ["end_at"]
    outside = {"at": "2026-03-29T00:00:00Z", "start_at": "2026-03-29T00:00:01Z"}
    assert read(outside)[1] == ["at"]
