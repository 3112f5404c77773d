"""Jitter (ADR 0037): a golden value, the bounds, and the gap to the *next* occurrence."""

from __future__ import annotations

import itertools

import pytest

from appliance.core.cron import parse_cron
from appliance.core.instants import parse_instant
from appliance.core.jitter import PlannedOccurrence, jitter_ms, planned_occurrences

SCHEDULE = "sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB"
AT = parse_instant("2026-08-06T03:00:00Z")
# SHA-256("jitter:sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB2026-08-06T03:00:00Z") starts ad6597f2e1f7411f,
# so u = 0xad6597f2e1f7411f / 2^64 = 12494559810638266655 / 18446744073709551616 ≈ 0.67733.
# Expected values are floor(u · J), worked out with exact fractions.


@pytest.mark.parametrize(
    ("jitter_seconds", "gap_ms", "expected"),
    [
        (3600, 86_400_000, 2_438_393),  # J = 3,600,000
        (3600, 60_000, 40_639),  # J = gap − 1 = 59,999
        (60, 1_000, 676),  # J = 999
        (1, 86_400_000, 677),  # J = 1,000
        (0, 86_400_000, 0),  # no jitter
        (3600, 1, 0),  # J = 0: the next occurrence is 1 ms later
    ],
)
def test_golden_jitter(jitter_seconds: int, gap_ms: int, expected: int) -> None:
    assert jitter_ms(SCHEDULE, AT, jitter_seconds, gap_ms) == expected


def test_jitter_depends_on_schedule_and_occurrence() -> None:
    base = jitter_ms(SCHEDULE, AT, 3600, 86_400_000)
    assert jitter_ms(SCHEDULE, AT + 1000, 3600, 86_400_000) != base
    assert jitter_ms(SCHEDULE[:-1] + "X", AT, 3600, 86_400_000) != base


@pytest.mark.parametrize(("jitter_seconds", "gap_ms"), [(-1, 1000), (10, 0)])
def test_nonsense_arguments_are_refused(jitter_seconds: int, gap_ms: int) -> None:
    with pytest.raises(ValueError, match="jitter_seconds must be"):
        jitter_ms(SCHEDULE, AT, jitter_seconds, gap_ms)


def test_no_jitter_means_due_at_the_nominal_time() -> None:
    spec = parse_cron("*/5 * * * *", "Europe/London")
    planned = list(
        itertools.islice(
            planned_occurrences(spec, schedule_id=SCHEDULE, jitter_seconds=0, after_ms=AT), 3
        )
    )
    assert planned == [
        PlannedOccurrence(scheduled_for=AT + 300_000, due_at=AT + 300_000),
        PlannedOccurrence(scheduled_for=AT + 600_000, due_at=AT + 600_000),
        PlannedOccurrence(scheduled_for=AT + 900_000, due_at=AT + 900_000),
    ]


def test_the_window_is_bounded_by_the_gap_to_the_next_occurrence() -> None:
    # 03:00 and 03:01 daily: after 03:00 the next is 60 s away, after 03:01 it is 23 h 59 min.
    spec = parse_cron("0,1 3 * * *", "UTC")
    first, second = itertools.islice(
        planned_occurrences(spec, schedule_id=SCHEDULE, jitter_seconds=3600, after_ms=AT - 1), 2
    )
    assert first.scheduled_for == AT
    assert first.due_at == AT + jitter_ms(SCHEDULE, AT, 3600, 60_000)
    assert first.due_at == AT + 40_639  # the golden value for J = 59,999 above
    assert second.scheduled_for == AT + 60_000
    assert second.due_at == AT + 60_000 + jitter_ms(SCHEDULE, AT + 60_000, 3600, 86_340_000)


def test_every_minute_with_an_hour_of_jitter_stays_inside_each_minute() -> None:
    spec = parse_cron("* * * * *", "UTC")
    planned = list(
        itertools.islice(
            planned_occurrences(spec, schedule_id=SCHEDULE, jitter_seconds=3600, after_ms=AT),
            200,
        )
    )
    for current, following in itertools.pairwise(planned):
        assert current.scheduled_for <= current.due_at < following.scheduled_for
    assert len({p.due_at - p.scheduled_for for p in planned}) > 150  # spread, not constant


def test_planning_is_deterministic() -> None:
    spec = parse_cron("*/7 * * * *", "America/New_York")

    def plan() -> list[PlannedOccurrence]:
        return list(
            itertools.islice(
                planned_occurrences(spec, schedule_id=SCHEDULE, jitter_seconds=30, after_ms=AT),
                50,
            )
        )

    assert plan() == plan()
