"""A schedule's DST policy (ADR 0043): goldens for every combination of ``gap`` and
``fold`` across Europe/Berlin's 2026 transitions (02:00→03:00 on 29 March, 03:00→02:00 on
25 October), the marks a preview shows, the defaults being ADR 0037's rules, and
properties that no policy ever yields a duplicate or a non-increasing instant."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.cron import dst_mark, occurrences_after, parse_cron
from appliance.core.dst import DstMark, Fold, Gap, gaps_between, scan_gaps
from appliance.core.instants import format_instant, parse_instant
from appliance.core.occurrence_cache import OccurrenceCache
from tests.core.test_cron_properties import EXPRESSIONS, STARTS, ZONES, take, valid

BERLIN = "Europe/Berlin"
MARCH = ("2026-03-27T12:00:00Z", "2026-03-30T12:00:00Z")
OCTOBER = ("2026-10-23T12:00:00Z", "2026-10-26T12:00:00Z")

# `30 2 * * *` in Berlin: 02:30 does not exist on 29 March and happens twice on 25 October.
FIXED_GAP = {
    Gap.SHIFT: ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
    Gap.SKIP: ["2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z"],
}
FIXED_FOLD = {
    Fold.FIRST: ["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
    Fold.LAST: ["2026-10-24T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"],
    Fold.BOTH: [
        "2026-10-24T00:30:00Z",
        "2026-10-25T00:30:00Z",
        "2026-10-25T01:30:00Z",
        "2026-10-26T01:30:00Z",
    ],
}
# `*/30 2 * * *` (a wildcard spec: 02:00 and 02:30) on the two days themselves.
WILD_GAP = {
    Gap.SHIFT: ["2026-03-29T01:00:00Z"],  # 02:00 and 02:30 both shift to 03:00: once
    Gap.SKIP: [],
}
WILD_FOLD = {
    Fold.FIRST: ["2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z"],
    Fold.LAST: ["2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z"],
    Fold.BOTH: [
        "2026-10-25T00:00:00Z",
        "2026-10-25T00:30:00Z",
        "2026-10-25T01:00:00Z",
        "2026-10-25T01:30:00Z",
    ],
}
COMBINATIONS = list(itertools.product(Gap, Fold))


def fires(expression: str, window: tuple[str, str], gap: str | None, fold: str | None) -> list[str]:
    spec = parse_cron(expression, BERLIN, dst_gap=gap, dst_fold=fold)
    start, end = (parse_instant(t) for t in window)
    found = itertools.takewhile(lambda ms: ms < end, occurrences_after(spec, start))
    return [format_instant(ms) for ms in found]


@pytest.mark.parametrize(("gap", "fold"), COMBINATIONS)
def test_a_fixed_time_spec_follows_every_policy(gap: Gap, fold: Fold) -> None:
    assert fires("30 2 * * *", MARCH, gap, fold) == FIXED_GAP[gap]
    assert fires("30 2 * * *", OCTOBER, gap, fold) == FIXED_FOLD[fold]


@pytest.mark.parametrize(("gap", "fold"), COMBINATIONS)
def test_a_wildcard_spec_follows_every_policy(gap: Gap, fold: Fold) -> None:
    march = ("2026-03-28T23:00:00Z", "2026-03-29T12:00:00Z")
    october = ("2026-10-24T23:00:00Z", "2026-10-25T12:00:00Z")
    assert fires("*/30 2 * * *", march, gap, fold) == WILD_GAP[gap]
    assert fires("*/30 2 * * *", october, gap, fold) == WILD_FOLD[fold]


def test_without_a_policy_each_class_keeps_adr_0037s_rule() -> None:
    for window in (MARCH, OCTOBER):
        assert fires("30 2 * * *", window, None, None) == fires(
            "30 2 * * *", window, "shift", "first"
        )
        assert fires("*/30 2 * * *", window, None, None) == fires(
            "*/30 2 * * *", window, "skip", "both"
        )
    # One key given: the other keeps the class's rule.
    assert fires("30 2 * * *", OCTOBER, "skip", None) == FIXED_FOLD[Fold.FIRST]
    assert fires("30 2 * * *", MARCH, None, "both") == FIXED_GAP[Gap.SHIFT]
    assert parse_cron("30 2 * * *", BERLIN) == parse_cron("30 2 * * *", BERLIN, dst_gap="shift")


@pytest.mark.parametrize(("gap", "fold"), COMBINATIONS)
def test_the_marks_say_what_a_transition_did(gap: Gap, fold: Fold) -> None:
    spec = parse_cron("30 2 * * *", BERLIN, dst_gap=gap, dst_fold=fold)
    marks = {
        text: dst_mark(spec, parse_instant(text)) for text in FIXED_GAP[gap] + FIXED_FOLD[fold]
    }
    shifted = marks.pop("2026-03-29T01:00:00Z", None)
    if gap is Gap.SHIFT:
        assert shifted is not None and shifted[0] is DstMark.GAP_SHIFTED
        assert shifted[1].isoformat() == "2026-03-29T02:30:00"
    if fold is not Fold.LAST:
        first = marks.pop("2026-10-25T00:30:00Z")
        assert first is not None and first[0] is DstMark.FOLD_FIRST
    if fold is not Fold.FIRST:
        last = marks.pop("2026-10-25T01:30:00Z")
        assert last is not None and last[0] is DstMark.FOLD_LAST
        assert last[1].isoformat() == "2026-10-25T02:30:00"
    assert set(marks.values()) == {None}  # the ordinary days are unmarked


def test_a_genuine_time_at_the_gaps_end_is_not_called_shifted() -> None:
    # `0 3 * * *` fires at 03:00 every day; nothing inside the gap matches it.
    spec = parse_cron("0 3 * * *", BERLIN)
    assert dst_mark(spec, parse_instant("2026-03-29T01:00:00Z")) is None
    # A wildcard spec skipping the gap marks nothing either, even at 03:00.
    hourly = parse_cron("0 * * * *", BERLIN)
    assert dst_mark(hourly, parse_instant("2026-03-29T01:00:00Z")) is None


def test_the_cache_keeps_policies_apart() -> None:
    cache = OccurrenceCache()
    start = parse_instant(OCTOBER[0])
    for fold in Fold:
        spec = cache.spec("30 2 * * *", BERLIN, None, fold)
        found = [format_instant(ms) for ms in itertools.islice(cache.after(spec, start), 4)]
        expected = list(itertools.islice(occurrences_after(spec, start), 4))
        assert found == [format_instant(ms) for ms in expected]
        assert found[: len(FIXED_FOLD[fold])] == FIXED_FOLD[fold]


def test_gaps_between_finds_each_jump() -> None:
    from zoneinfo import ZoneInfo

    found = gaps_between(
        ZoneInfo(BERLIN),
        parse_instant("2026-01-01T00:00:00Z"),
        parse_instant("2027-01-01T00:00:00Z"),
    )
    assert [
        (format_instant(g.end_ms), g.wall_start.isoformat(), g.wall_end.isoformat()) for g in found
    ] == [("2026-03-29T01:00:00Z", "2026-03-29T02:00:00", "2026-03-29T03:00:00")]
    howe = gaps_between(
        ZoneInfo("Australia/Lord_Howe"),
        parse_instant("2026-01-01T00:00:00Z"),
        parse_instant("2027-01-01T00:00:00Z"),
    )
    assert [(g.wall_start.isoformat(), g.wall_end.isoformat()) for g in howe] == [
        ("2026-10-04T02:00:00", "2026-10-04T02:30:00")
    ]
    assert gaps_between(ZoneInfo("UTC"), 0, parse_instant("2027-01-01T00:00:00Z")) == []


@settings(max_examples=60, deadline=None)
@given(
    zone=st.sampled_from(["Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "UTC"]),
    start=st.integers(min_value=0, max_value=4_102_444_800_000),  # 1970 to 2100
    span=st.integers(min_value=0, max_value=3 * 366 * 86_400_000),
)
def test_gaps_kept_per_zone_and_year_are_the_gaps_scanned_over_the_span(
    zone: str, start: int, span: int
) -> None:
    """The linter asks every create for the coming year's gaps; they are scanned once per
    calendar year and kept, and must be exactly what a scan of the span itself finds
    (spans across new year included, ms-precise bounds)."""
    from zoneinfo import ZoneInfo

    assert gaps_between(ZoneInfo(zone), start, start + span) == scan_gaps(
        ZoneInfo(zone), start, start + span
    )


POLICIES = st.tuples(st.sampled_from([None, *Gap]), st.sampled_from([None, *Fold]))


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), STARTS, POLICIES)
def test_no_policy_yields_a_duplicate_or_a_step_back(
    expression: str, zone: str, after_ms: int, policy: tuple[str | None, str | None]
) -> None:
    valid(expression, zone)
    spec = parse_cron(expression, zone, dst_gap=policy[0], dst_fold=policy[1])
    found = take(spec, after_ms, 60)
    assert len(found) == 60
    assert found[0] > after_ms
    assert all(a < b for a, b in itertools.pairwise(found))
    assert all(ms % 1000 == 0 for ms in found)


@settings(max_examples=150, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), STARTS, POLICIES, st.integers(0, 39))
def test_every_policy_resumes_from_any_occurrence_the_same_way(
    expression: str,
    zone: str,
    after_ms: int,
    policy: tuple[str | None, str | None],
    index: int,
) -> None:
    valid(expression, zone)
    spec = parse_cron(expression, zone, dst_gap=policy[0], dst_fold=policy[1])
    found = take(spec, after_ms, 40)
    assert take(spec, found[index], 39 - index) == found[index + 1 :]
    assert take(spec, found[index] - 1, 40 - index) == found[index:]


@pytest.mark.parametrize(
    ("fold", "notes"),
    [
        (Fold.FIRST, ["this is the first time; the second is not run (dst.fold: first)"]),
        (Fold.LAST, ["this is the second time; the first was not run (dst.fold: last)"]),
        (
            Fold.BOTH,
            [
                "this is the first time; it runs both times (dst.fold: both)",
                "this is the second time; it runs both times (dst.fold: both)",
            ],
        ),
    ],
)
def test_a_previewed_fold_says_what_becomes_of_the_other_instant(
    fold: Fold, notes: list[str]
) -> None:
    from appliance.core.cron_preview import preview_occurrences
    from tests.core.test_schedule_warnings import timing

    after = parse_instant(OCTOBER[0])
    items = preview_occurrences(timing("30 2 * * *", BERLIN, dst_fold=fold), after, 4)
    found = [item.dst_note for item in items if item.dst_note is not None]
    assert found == [f"02:30 happens twice on 2026-10-25: {note}" for note in notes]
