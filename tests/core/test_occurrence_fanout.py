"""A pass's fan-out answers exactly what ``occurrences_after`` answers, however far each
schedule reads — inside the memoised prefix, past it, or to a spec's last occurrence —
and computes each distinct (spec, start) once."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.cron import END_MS, CronSpec, occurrences_after, parse_cron
from appliance.core.instants import parse_instant
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.occurrence_fanout import FannedOut
from tests.core.test_occurrence_cache import BASE, SPAN_MS, SPECS, TINY


def expected(spec: CronSpec, after_ms: int, n: int) -> list[int]:
    return list(itertools.islice(occurrences_after(spec, after_ms), n))


@settings(max_examples=150, deadline=None)
@given(
    reads=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(SPECS) - 1),
            st.integers(min_value=0, max_value=3),  # one of few starts: shared prefixes
            st.integers(min_value=0, max_value=40),  # how far this reader reads
        ),
        min_size=1,
        max_size=12,
    ),
    horizon_s=st.integers(min_value=0, max_value=SPAN_MS // 1000),
    limit=st.integers(min_value=0, max_value=12),
    tiny=st.booleans(),
    interleave=st.booleans(),
)
def test_every_reader_gets_the_direct_answer(
    reads: list[tuple[int, int, int]], horizon_s: int, limit: int, tiny: bool, interleave: bool
) -> None:
    cache = OccurrenceCache(**TINY) if tiny else OccurrenceCache()
    fanned = FannedOut(cache, horizon=BASE + horizon_s * 1000, limit=limit)
    starts = [BASE - 1, BASE + 86_399_999, BASE + SPAN_MS // 2, BASE + SPAN_MS - 1]
    streams = [(SPECS[i], starts[s], n, fanned.after(SPECS[i], starts[s])) for i, s, n in reads]
    got: list[list[int]] = [[] for _ in streams]
    if interleave:  # readers held open across each other's steps, as a pass holds them
        for step in range(max(n for _, _, n, _ in streams)):
            for k, (_, _, n, stream) in enumerate(streams):
                if step < n:
                    value = next(stream, None)
                    if value is not None:
                        got[k].append(value)
    else:
        got = [list(itertools.islice(stream, n)) for _, _, n, stream in streams]
    for (spec, start, n, _), values in zip(streams, got, strict=True):
        assert values == expected(spec, start, n)


def test_a_spec_that_ends_ends_in_the_fan_out_too() -> None:
    """Past a spec's last occurrence (before year 9999) nothing more comes, whether the
    prefix held the end (a horizon past it) or not (a horizon before it)."""
    spec = parse_cron("0 0 1 1 *", "UTC")
    start = parse_instant("9996-06-01T00:00:00Z")
    last = [parse_instant("9997-01-01T00:00:00Z"), parse_instant("9998-01-01T00:00:00Z")]
    for horizon in (start, END_MS):
        fanned = FannedOut(OccurrenceCache(), horizon=horizon, limit=5)
        for _ in range(2):  # computed, then memoised
            assert list(fanned.after(spec, start)) == expected(spec, start, 5) == last


def test_schedules_sharing_a_spec_and_start_all_get_the_direct_answer() -> None:
    """Fifty readers of one (spec, start), each read in full before the next: the shared
    fan-out gives each what ``occurrences_after`` gives (no count of cache reads: that is
    the fan-out's cost, not its behaviour)."""
    spec = SPECS[2]  # every 7 s
    fanned = FannedOut(OccurrenceCache(), horizon=BASE + 60_000, limit=100)
    direct = [ms for ms in expected(spec, BASE, 20) if ms <= BASE + 60_000]
    for _ in range(50):
        values = list(itertools.takewhile(lambda ms: ms <= BASE + 60_000, fanned.after(spec, BASE)))
        assert values == direct
