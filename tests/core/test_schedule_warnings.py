"""The schedule linter (``core.schedule_warnings``): each code on the timing that earns it,
none on ordinary timings, bounds and kinds respected."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.cron_preview import preview_occurrences
from appliance.core.dst import DstMark, Fold, Gap
from appliance.core.instants import parse_instant
from appliance.core.schedule_warnings import (
    YEAR_MS,
    WarningCode,
    schedule_warnings,
    warning_documents,
)
from appliance.core.timing_input import TimingInput

NOW = parse_instant("2026-01-10T12:00:00Z")


def timing(cron: str = "", timezone: str = "UTC", **extra: object) -> TimingInput:
    fields: dict[str, object] = {
        "cron": cron,
        "timezone": timezone,
        "at": None,
        "every_seconds": None,
        "start_at": None,
        "end_at": None,
    }
    fields.update(extra)
    return TimingInput(**fields)  # type: ignore[arg-type]


def codes(value: TimingInput, jitter_seconds: int = 0) -> list[str]:
    return [w.code.value for w in schedule_warnings(value, jitter_seconds=jitter_seconds, now=NOW)]


def messages(value: TimingInput, jitter_seconds: int = 0) -> dict[str, str]:
    found = schedule_warnings(value, jitter_seconds=jitter_seconds, now=NOW)
    return {w.code.value: w.message for w in found}


@pytest.mark.parametrize(
    "value",
    [
        timing("*/5 * * * *"),
        timing("*/5 * * * *", "Europe/Berlin"),
        timing("0 3 * * *", "Europe/Berlin"),
        timing("0 9 * * 1-5", "America/New_York"),
        timing("0 0 1 * *"),
        timing("0 0 */10 * *"),  # a step over days: whatever days exist, as asked
        timing("0 * * * *", "Europe/Berlin"),  # wildcard: nothing moves into the gap
        timing(every_seconds=300, start_at=NOW),
        timing(at=NOW + 86_400_000),
    ],
)
def test_ordinary_timings_get_no_warning(value: TimingInput) -> None:
    assert codes(value) == []
    assert codes(value, jitter_seconds=30) == []


def test_both_day_fields_say_which_rule_applies() -> None:
    either = messages(timing("0 0 1,15 * 5"))["dom_dow_both"]
    assert "either" in either and "OR" in either
    both = messages(timing("0 0 */2 * 1"))["dom_dow_both"]
    assert both.startswith("day of month and day of week are both given; both:")
    assert "AND" in both


def test_a_day_that_some_months_lack() -> None:
    assert messages(timing("0 0 31 * *"))["day_skips_months"] == (
        "day 31 does not exist in February, April, June, September and November,"
        " so it never fires then"
    )
    assert messages(timing("0 0 29 2 *"))["day_skips_months"] == (
        "day 29 exists in February only in leap years, so it fires then only"
    )
    assert codes(timing("0 0 30 1,3 *")) == []  # January and March both have a 30th
    assert codes(timing("0 0 1,30 * *")) == ["day_skips_months"]


@pytest.mark.parametrize(
    ("gap", "outcome"), [(None, "runs at 03:00 instead"), (Gap.SKIP, "does not run that day")]
)
def test_a_fixed_time_inside_a_dst_gap(gap: Gap | None, outcome: str) -> None:
    found = messages(timing("30 2 * * *", "Europe/Berlin", dst_gap=gap))
    assert found["time_in_dst_gap"].startswith(
        "02:30 does not exist on 2026-03-29 in Europe/Berlin (clocks jump from 02:00 to 03:00)"
    )
    assert outcome in found["time_in_dst_gap"]


def test_the_dst_gap_warning_looks_only_within_the_year_and_the_bounds() -> None:
    berlin = "Europe/Berlin"
    assert codes(timing("30 2 * * *", berlin, end_at=parse_instant("2026-03-01T00:00:00Z"))) == []
    after_spring = timing("30 2 * * *", berlin, start_at=parse_instant("2026-04-01T00:00:00Z"))
    assert codes(after_spring) == ["time_in_dst_fold"]  # the gap is past, the fold to come
    summer = timing(
        "30 2 * * *",
        berlin,
        start_at=parse_instant("2026-04-01T00:00:00Z"),
        end_at=parse_instant("2026-10-01T00:00:00Z"),
    )
    assert codes(summer) == []
    # Only Sundays in March: still the last Sunday, the gap.
    assert codes(timing("30 2 * 3 0", berlin)) == ["time_in_dst_gap"]
    # Lord Howe's gap is 02:00-02:30: 02:15 is inside, 02:30 is not.
    assert codes(timing("15 2 * * *", "Australia/Lord_Howe")) == ["time_in_dst_gap"]
    assert codes(timing("30 2 * * *", "Australia/Lord_Howe")) == []
    assert codes(timing("30 2 * * *", "UTC")) == []
    assert codes(timing("30 2 * * *", berlin, dst_fold=Fold.BOTH)) == [
        "time_in_dst_gap",
        "time_in_dst_fold",
    ]
    assert codes(timing("30 3 * * *", berlin)) == []  # 03:00 is after both transitions


def test_a_timing_that_will_not_fire_within_a_year() -> None:
    assert messages(timing("0 0 29 2 *"))["no_fire_within_year"] == (
        "the schedule first fires at 2028-02-29T00:00:00Z, more than a year from now"
    )
    later = parse_instant("2027-06-01T00:00:00Z")
    assert codes(timing(at=later)) == ["no_fire_within_year"]
    assert codes(timing(every_seconds=60, start_at=later)) == ["no_fire_within_year"]
    assert messages(timing("0 3 * * *", end_at=NOW - 1000))["no_fire_within_year"] == (
        "the schedule never fires after now"
    )


def test_jitter_at_least_the_period() -> None:
    assert codes(timing("*/5 * * * *"), jitter_seconds=299) == []
    assert codes(timing("*/5 * * * *"), jitter_seconds=300) == ["jitter_exceeds_period"]
    assert "(300 s)" in messages(timing("*/5 * * * *"), 300)["jitter_exceeds_period"]
    assert codes(timing("* * * * * *"), jitter_seconds=1) == ["jitter_exceeds_period"]
    assert codes(timing(every_seconds=90, start_at=NOW), jitter_seconds=90) == [
        "jitter_exceeds_period"
    ]
    # The shortest gap decides: 09:00 and 09:10 every day is 10 minutes apart.
    assert codes(timing("0,10 9 * * *"), jitter_seconds=600) == ["jitter_exceeds_period"]
    assert codes(timing(at=NOW + 1000), jitter_seconds=3600) == []  # one occurrence


def test_codes_are_stable_and_documented_as_json() -> None:
    assert [c.value for c in WarningCode] == [
        "dom_dow_both",
        "day_skips_months",
        "time_in_dst_gap",
        "time_in_dst_fold",
        "no_fire_within_year",
        "jitter_exceeds_period",
    ]
    found = schedule_warnings(timing("0 0 31 * 5"), jitter_seconds=0, now=NOW)
    assert [d["code"] for d in warning_documents(found)] == ["dom_dow_both", "day_skips_months"]


def test_a_crons_short_month_finding_is_worked_out_once_and_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from appliance.core import schedule_warnings as module

    read: list[str] = []
    real = module.field_values

    def counted(expression: str) -> tuple[set[int], ...]:
        read.append(expression)
        return real(expression)

    monkeypatch.setattr(module, "field_values", counted)
    expression = "0 6 31 1-4 *"  # an expression no other test uses: not kept yet
    first = schedule_warnings(timing(expression), jitter_seconds=0, now=NOW)
    again = schedule_warnings(
        timing(expression, timezone="Asia/Kolkata"), jitter_seconds=0, now=NOW
    )
    assert read == [expression]
    assert [w for w in first if w.code is WarningCode.DAY_SKIPS_MONTHS] == [
        w for w in again if w.code is WarningCode.DAY_SKIPS_MONTHS
    ]
    assert any("day 31 does not exist in February" in w.message for w in first)


# Each zone's two transitions, seen a few days before each: the warning that comes first
# names that transition (spring: the skipped time; autumn: the repeated one) and what the
# default policy does; the other transition, months later, comes second. Sydney is the
# southern hemisphere: its fold is in April, its gap in October.
TRANSITIONS = [
    (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-03-25T12:00:00Z",
        "time_in_dst_gap",
        "02:30 does not exist on 2026-03-29 in Europe/Berlin (clocks jump from 02:00 to 03:00):"
        " the schedule runs at 03:00 instead (dst.gap: shift)",
    ),
    (
        "Europe/Berlin",
        "30 2 * * *",
        "2026-10-20T12:00:00Z",
        "time_in_dst_fold",
        "02:30 happens twice on 2026-10-25 in Europe/Berlin (clocks go back from 03:00 to 02:00):"
        " the schedule runs once, at the first 02:30 (CEST) (dst.fold: first)",
    ),
    (
        "America/New_York",
        "30 2 * * *",
        "2026-03-01T12:00:00Z",
        "time_in_dst_gap",
        "02:30 does not exist on 2026-03-08 in America/New_York (clocks jump from 02:00 to"
        " 03:00): the schedule runs at 03:00 instead (dst.gap: shift)",
    ),
    (
        "America/New_York",
        "30 1 * * *",
        "2026-10-28T12:00:00Z",
        "time_in_dst_fold",
        "01:30 happens twice on 2026-11-01 in America/New_York (clocks go back from 02:00 to"
        " 01:00): the schedule runs once, at the first 01:30 (EDT) (dst.fold: first)",
    ),
    (
        "Australia/Sydney",
        "30 2 * * *",
        "2026-04-01T12:00:00Z",
        "time_in_dst_fold",
        "02:30 happens twice on 2026-04-05 in Australia/Sydney (clocks go back from 03:00 to"
        " 02:00): the schedule runs once, at the first 02:30 (AEDT) (dst.fold: first)",
    ),
    (
        "Australia/Sydney",
        "30 2 * * *",
        "2026-09-30T12:00:00Z",
        "time_in_dst_gap",
        "02:30 does not exist on 2026-10-04 in Australia/Sydney (clocks jump from 02:00 to"
        " 03:00): the schedule runs at 03:00 instead (dst.gap: shift)",
    ),
]


@pytest.mark.parametrize(("zone", "cron", "now", "code", "message"), TRANSITIONS)
def test_the_dst_warning_names_the_coming_transition(
    zone: str, cron: str, now: str, code: str, message: str
) -> None:
    found = schedule_warnings(timing(cron, zone), jitter_seconds=0, now=parse_instant(now))
    assert found[0].code.value == code
    assert found[0].message == message
    # 02:30 is in both of these zones' gap and fold; New York's 01:30 only in its fold.
    expected = 2 if cron == "30 2 * * *" and zone != "America/New_York" else 1
    assert len([w for w in found if w.code.value.startswith("time_in_dst")]) == expected


@pytest.mark.parametrize(
    ("fold", "words"),
    [
        (Fold.FIRST, "runs once, at the first 02:30 (CEST) (dst.fold: first)"),
        (Fold.LAST, "runs once, at the second 02:30 (CET) (dst.fold: last)"),
        (Fold.BOTH, "runs twice, at 02:30 CEST and at 02:30 CET (dst.fold: both)"),
    ],
)
def test_the_fold_warning_says_what_the_policy_does(fold: Fold, words: str) -> None:
    october = parse_instant("2026-10-20T12:00:00Z")
    value = timing("30 2 * * *", "Europe/Berlin", dst_fold=fold)
    found = schedule_warnings(value, jitter_seconds=0, now=october)
    assert found[0].code is WarningCode.TIME_IN_DST_FOLD
    assert found[0].message.endswith(f"the schedule {words}")


@settings(max_examples=40, deadline=None)
@given(
    zone=st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Sydney"]),
    hour=st.integers(min_value=0, max_value=4),
    minute=st.sampled_from([0, 15, 30, 59]),
    now=st.integers(
        min_value=parse_instant("2026-01-01T00:00:00Z"),
        max_value=parse_instant("2030-01-01T00:00:00Z"),
    ),
)
def test_the_dst_warnings_agree_with_the_preview_of_the_year(
    zone: str, hour: int, minute: int, now: int
) -> None:
    """A daily fixed time is warned of exactly when the year's preview has an occurrence
    that a gap shifted or a fold touched, and the first DST warning names the soonest."""
    value = timing(f"{minute} {hour} * * *", zone)
    items = [
        item for item in preview_occurrences(value, now, 367) if item.scheduled_for <= now + YEAR_MS
    ]
    marked = [item for item in items if item.dst is not None]
    found = [
        w
        for w in schedule_warnings(value, jitter_seconds=0, now=now)
        if w.code.value.startswith("time_in_dst")
    ]
    expected = {
        DstMark.GAP_SHIFTED: WarningCode.TIME_IN_DST_GAP,
        DstMark.FOLD_FIRST: WarningCode.TIME_IN_DST_FOLD,
    }
    in_order = list(dict.fromkeys(expected[item.dst] for item in marked if item.dst))
    assert [w.code for w in found] == in_order
    if marked:
        day = marked[0].local_time[:10]
        assert f" on {day} in {zone} " in found[0].message
