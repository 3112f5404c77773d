"""Shared occurrences (one computation per expression, timezone and start, and a bounded
memo of the first few that outlives a planner pass) give exactly the private sequence."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core import cron
from appliance.core.cron import SharedOccurrences, occurrences_after, parse_cron
from tests.core.test_cron_properties import EXPRESSIONS, STARTS, ZONES, take, valid


@settings(max_examples=200, deadline=None)
@given(EXPRESSIONS, st.sampled_from(ZONES), STARTS, st.integers(0, 11))
def test_shared_occurrences_equal_the_private_sequence_across_passes(
    expression: str, zone: str, after_ms: int, index: int
) -> None:
    spec = valid(expression, zone)
    expected = take(spec, after_ms, 12)
    for _ in range(2):  # a second pass starts from the memo, then steps on by itself
        shared = SharedOccurrences()
        first, second = shared.after(spec, after_ms), shared.after(spec, after_ms)
        head = list(itertools.islice(first, index))
        assert list(itertools.islice(second, 12)) == expected
        assert head + list(itertools.islice(first, 12 - index)) == expected
    resumed = SharedOccurrences().after(spec, expected[index])
    assert list(itertools.islice(resumed, 11 - index)) == expected[index + 1 :]


def test_a_later_pass_takes_the_first_occurrences_from_the_memo() -> None:
    spec = parse_cron("*/10 * * * * *", "Europe/Berlin")
    start = 1_785_985_200_000  # 2026-08-06T03:00:00Z
    list(itertools.islice(SharedOccurrences().after(spec, start), 2))
    before = cron._leading.cache_info()
    values = list(itertools.islice(SharedOccurrences().after(spec, start), 2))
    after = cron._leading.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)
    assert values == list(itertools.islice(occurrences_after(spec, start), 2))
