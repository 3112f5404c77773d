"""``next_runs`` come from the app's occurrence cache (``ApiContext.upcoming``) and follow
the clock across requests; the cache itself is tested in tests/core/test_occurrence_cache.py."""

from __future__ import annotations

import itertools

from appliance.core.cron import occurrences_after, parse_cron
from appliance.core.instants import parse_instant

from .conftest import Api, FakeClock


async def test_next_runs_follow_the_clock_across_requests(api: Api, clock: FakeClock) -> None:
    created = await api.create(cron="*/5 * * * * *", jitter_seconds=2)
    for _ in range(12):
        clock.advance(3_700)  # past one or two occurrences per step
        listed = await api.call("GET", "/v1/schedules")
        one = await api.call("GET", f"/v1/schedules/{created['id']}")
        assert listed.body["items"][0]["next_runs"] == one.body["next_runs"]
        scheduled = [parse_instant(r["scheduled_for"]) for r in one.body["next_runs"]]
        spec = parse_cron("*/5 * * * * *")
        assert scheduled == list(itertools.islice(occurrences_after(spec, clock.now), 5))
        assert all(
            0 <= parse_instant(r["due_at"]) - parse_instant(r["scheduled_for"]) < 2_000
            for r in one.body["next_runs"]
        )
