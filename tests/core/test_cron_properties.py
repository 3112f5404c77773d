"""Properties of occurrences and jitter over generated specs, zones and starting points.

One property checks occurrences against a brute-force oracle: every UTC minute around a
2026 DST transition is converted to local wall-clock time and matched by the independent
matcher of ``tests/core/cron_oracle.py`` (no croniter), then the ADR 0037 rules pick the
instants that should fire.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from appliance.core.cron import CronSpec, occurrences_after, parse_cron
from appliance.core.instants import parse_instant
from appliance.core.jitter import jitter_ms, planned_occurrences
from appliance.errors import ValidationError
from tests.core.cron_oracle import oracle

ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"]
# (zone, the UTC instant its offset changes) for every 2026 transition of the zones above.
TRANSITIONS = [
    ("America/New_York", "2026-03-08T07:00:00Z"),
    ("America/New_York", "2026-11-01T06:00:00Z"),
    ("Europe/London", "2026-03-29T01:00:00Z"),
    ("Europe/London", "2026-10-25T01:00:00Z"),
    ("Australia/Lord_Howe", "2026-10-03T15:30:00Z"),
    ("Australia/Lord_Howe", "2026-04-04T15:00:00Z"),
]
EARLIEST = parse_instant("2020-01-01T00:00:00Z")
LATEST = parse_instant("2035-01-01T00:00:00Z")


def field(low: int, high: int, *, favourites: tuple[int, ...] = ()) -> st.SearchStrategy[str]:
    value = st.one_of(st.integers(low, high), st.sampled_from(favourites or (low,)))
    span = st.tuples(st.integers(low, high - 1), st.integers(1, high - low)).map(
        lambda t: f"{t[0]}-{min(high, t[0] + t[1])}"
    )
    step = st.integers(1, high - low + 1)
    item = st.one_of(
        st.just("*"),
        value.map(str),
        span,
        step.map(lambda n: f"*/{n}"),
        st.tuples(span, step).map(lambda t: f"{t[0]}/{t[1]}"),
        st.tuples(value, step).map(lambda t: f"{t[0]}/{t[1]}"),
    )
    return st.lists(item, min_size=1, max_size=3).map(",".join)


# Hours and minutes near the transitions are favoured so the DST rules get exercised.
MINUTES = field(0, 59, favourites=(0, 15, 30, 45))
HOURS = field(0, 23, favourites=(0, 1, 2, 3))
FIVE_FIELDS = st.tuples(
    MINUTES,
    HOURS,
    st.one_of(st.just("*"), field(1, 31)),
    st.one_of(st.just("*"), field(1, 12, favourites=(3, 4, 10, 11))),
    st.one_of(st.just("*"), field(0, 7)),
).map(" ".join)
SIX_FIELDS = st.tuples(field(0, 59, favourites=(0, 30)), FIVE_FIELDS).map(" ".join)
MACROS = st.sampled_from(["@hourly", "@daily", "@weekly", "@monthly", "@yearly"])
EXPRESSIONS = st.one_of(FIVE_FIELDS, SIX_FIELDS, MACROS)
NEAR_TRANSITIONS = st.sampled_from([t for _, t in TRANSITIONS]).flatmap(
    lambda t: st.integers(parse_instant(t) - 3 * 3_600_000, parse_instant(t) + 3 * 3_600_000)
)
STARTS = st.one_of(st.integers(EARLIEST, LATEST), NEAR_TRANSITIONS)


def valid(expression: str, zone: str) -> CronSpec:
    try:
        return parse_cron(expression, zone)
    except ValidationError:
        assume(False)  # e.g. day 31 in February only: refused, tested elsewhere
        raise


def take(spec: CronSpec, after_ms: int, count: int) -> list[int]:
    return list(itertools.islice(occurrences_after(spec, after_ms), count))


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), STARTS)
def test_occurrences_strictly_increase_after_the_start_in_whole_seconds(
    expression: str, zone: str, after_ms: int
) -> None:
    found = take(valid(expression, zone), after_ms, 60)
    assert len(found) == 60
    assert found[0] > after_ms
    assert all(a < b for a, b in itertools.pairwise(found))
    assert all(ms % 1000 == 0 for ms in found)


@settings(max_examples=150, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), STARTS, st.integers(0, 39))
def test_resuming_from_any_occurrence_continues_the_same_sequence(
    expression: str, zone: str, after_ms: int, index: int
) -> None:
    spec = valid(expression, zone)
    found = take(spec, after_ms, 40)
    assert take(spec, found[index], 39 - index) == found[index + 1 :]
    assert take(spec, found[index] - 1, 40 - index) == found[index:]


def expected_by_brute_force(expression: str, zone: str, start_ms: int, end_ms: int) -> set[int]:
    """ADR 0037 applied minute by minute in [start_ms, end_ms) (5-field specs only)."""
    tz = ZoneInfo(zone)
    tokens = expression.split()
    wildcard = "*" in tokens[0] or "*" in tokens[1]
    matcher = oracle(expression)
    expected: set[int] = set()
    moment = datetime.fromtimestamp(start_ms / 1000, tz=UTC)
    for _ in range((end_ms - start_ms) // 60_000):
        after = moment + timedelta(minutes=1)
        wall = moment.astimezone(tz).replace(tzinfo=None)
        if matcher.matches(wall):
            earliest = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
            if wildcard or earliest == moment:
                expected.add(int(moment.timestamp()) * 1000)
        # Wall times skipped between this minute and the next (a gap) shift to `after`.
        skipped = wall + timedelta(minutes=1)
        next_wall = after.astimezone(tz).replace(tzinfo=None)
        while not wildcard and skipped < next_wall:
            if matcher.matches(skipped):
                expected.add(int(after.timestamp()) * 1000)
            skipped += timedelta(minutes=1)
        moment = after
    return expected


@settings(max_examples=40, deadline=None)
@given(st.one_of(FIVE_FIELDS, MACROS), st.sampled_from(TRANSITIONS))
def test_occurrences_match_a_brute_force_oracle_around_transitions(
    expression: str, transition: tuple[str, str]
) -> None:
    zone, instant = transition
    spec = valid(expression, zone)
    fields = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@weekly": "0 0 * * 0"}
    fields |= {"@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *"}
    start = parse_instant(instant) - 3 * 3_600_000
    end = parse_instant(instant) + 3 * 3_600_000
    found = set(itertools.takewhile(lambda ms: ms < end, occurrences_after(spec, start - 1)))
    assert found == expected_by_brute_force(fields.get(expression, expression), zone, start, end)


@settings(max_examples=150, deadline=None)
@given(
    EXPRESSIONS,
    st.sampled_from(ZONES),
    STARTS,
    st.from_regex(r"sch_[0-9A-HJKMNP-TV-Z]{26}", fullmatch=True),
    st.integers(0, 3600),
)
def test_planned_jitter_stays_inside_its_window_and_before_the_next_occurrence(
    expression: str, zone: str, after_ms: int, schedule_id: str, jitter_seconds: int
) -> None:
    spec = valid(expression, zone)
    planned = list(
        itertools.islice(
            planned_occurrences(
                spec, schedule_id=schedule_id, jitter_seconds=jitter_seconds, after_ms=after_ms
            ),
            30,
        )
    )
    assert [p.scheduled_for for p in planned] == take(spec, after_ms, 30)
    for current, following in itertools.pairwise(planned):
        delay = current.due_at - current.scheduled_for
        assert 0 <= delay <= max(0, jitter_seconds * 1000 - 1)
        assert current.due_at < following.scheduled_for
    again = planned_occurrences(
        spec, schedule_id=schedule_id, jitter_seconds=jitter_seconds, after_ms=after_ms
    )
    assert list(itertools.islice(again, 30)) == planned


@given(
    st.text(min_size=1, max_size=40),
    st.integers(EARLIEST // 1000, LATEST // 1000).map(lambda s: s * 1000),
    st.integers(0, 3600),
    st.integers(1, 10**10),
)
def test_jitter_is_bounded_and_deterministic(
    schedule_id: str, scheduled_for: int, jitter_seconds: int, gap_ms: int
) -> None:
    value = jitter_ms(schedule_id, scheduled_for, jitter_seconds, gap_ms)
    window = min(jitter_seconds * 1000, gap_ms - 1)
    assert 0 <= value < max(1, window)
    assert value == jitter_ms(schedule_id, scheduled_for, jitter_seconds, gap_ms)
