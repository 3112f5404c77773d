"""The planner's occurrence cache: the one the caller passes is the one a pass fills, so the
Planner service, which keeps one across passes, parses and steps each spec once."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from appliance.core.cron import occurrences_after, parse_cron
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.store.infra.database import Database
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.store.conftest import T0

MINUTE = 60_000


def test_a_pass_fills_the_cache_it_is_given_even_an_empty_one(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    for _ in range(3):
        make_schedule(cron="*/10 * * * * *", next_fire_at=T0)
    cache = OccurrenceCache()
    result = engine_db.write_now(
        plan_once, now=T0 + MINUTE, config=PlannerConfig(), occurrences=cache
    )
    assert result.materialised == 3 * 7  # T0 .. T0 + 60 s, every 10 s, three schedules
    assert len(cache) == 1  # one spec, shared by the three
    spec = cache.spec("*/10 * * * * *", "UTC")
    assert spec is cache.spec("*/10 * * * * *", "UTC")
    held = cache.values_held
    assert list(itertools.islice(cache.after(spec, T0 - 1), 7)) == list(
        itertools.islice(occurrences_after(parse_cron("*/10 * * * * *"), T0 - 1), 7)
    )
    assert cache.values_held == held  # the pass had computed them already
