"""The schedule linter (``core.schedule_warnings``): each code on the timing that earns it,
none on ordinary timings, bounds and kinds respected."""

from __future__ import annotations

import pytest

from appliance.core.dst import Fold, Gap
from appliance.core.instants import parse_instant
from appliance.core.schedule_warnings import WarningCode, schedule_warnings, warning_documents
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
    assert codes(timing("30 2 * * *", berlin, start_at=parse_instant("2026-04-01T00:00:00Z"))) == []
    # Only Sundays in March: still the last Sunday, the gap.
    assert codes(timing("30 2 * 3 0", berlin)) == ["time_in_dst_gap"]
    # Lord Howe's gap is 02:00-02:30: 02:15 is inside, 02:30 is not.
    assert codes(timing("15 2 * * *", "Australia/Lord_Howe")) == ["time_in_dst_gap"]
    assert codes(timing("30 2 * * *", "Australia/Lord_Howe")) == []
    assert codes(timing("30 2 * * *", "UTC")) == []
    assert codes(timing("30 2 * * *", berlin, dst_fold=Fold.BOTH)) == ["time_in_dst_gap"]


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
