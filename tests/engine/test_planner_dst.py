"""The planner with a schedule's DST policy (ADR 0043) — a Hypothesis property: around
Europe/Berlin's 2026 transitions, whatever the clock does and however often the appliance
restarts, each occurrence the policy yields is materialised exactly once, and nothing
else (the occurrence cache keeps policies of one expression apart)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.core.dst import Fold, Gap
from appliance.core.instants import parse_instant
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.timing import occurrences
from appliance.store.infra.database import Database
from appliance.store.schedules import create_schedule
from appliance.store.tenants import create_tenant
from tests.engine.test_planner_kinds import CONFIG, SECOND, plan_until_done, rows, spec

HOUR = 3600 * SECOND
TRANSITIONS = [parse_instant("2026-03-29T01:00:00Z"), parse_instant("2026-10-25T01:00:00Z")]
EXPRESSIONS = ["30 2 * * *", "*/20 2 * * *", "0 * * * *", "15 1-3 * * *"]


@dataclass(frozen=True)
class Case:
    start: int
    expressions: list[str]
    policies: list[tuple[Gap | None, Fold | None]]
    steps: list[tuple[str, int]]  # ("jump", seconds) or ("restart", 0)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    transition = draw(st.sampled_from(TRANSITIONS))
    start = transition + draw(st.integers(-6 * 3600, 3600)) * SECOND
    count = draw(st.integers(1, 3))
    policy = st.tuples(st.sampled_from([None, *Gap]), st.sampled_from([None, *Fold]))
    step = st.one_of(
        st.tuples(st.just("jump"), st.integers(-3 * 3600, 4 * 3600)),
        st.tuples(st.just("restart"), st.just(0)),
    )
    return Case(
        start=start,
        # Several schedules of one expression with different policies share the cache.
        expressions=draw(st.lists(st.sampled_from(EXPRESSIONS), min_size=count, max_size=count)),
        policies=draw(st.lists(policy, min_size=count, max_size=count)),
        steps=draw(st.lists(step, min_size=1, max_size=6)),
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_each_occurrence_of_each_policy_is_materialised_once(case: Case) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "steeple.db"
        db = Database.open(path, threaded=False)
        tenant = db.write_now(create_tenant, name="t", now=case.start).tenant_id
        created = [
            db.write_now(
                create_schedule,
                tenant_id=tenant,
                spec=spec(cron=cron, timezone="Europe/Berlin", dst_gap=gap, dst_fold=fold),
                now=case.start,
            )
            for cron, (gap, fold) in zip(case.expressions, case.policies, strict=True)
        ]
        now, latest, cache = case.start, case.start, OccurrenceCache()
        for action, seconds in case.steps:
            if action == "restart":
                db.close()
                db, cache = Database.open(path, threaded=False), OccurrenceCache()
            else:
                now += seconds * SECOND
                latest = max(latest, now)
            plan_until_done(db, now, cache)
        horizon = latest + CONFIG.lookahead_ms
        for schedule in created:
            assert schedule.next_fire_at is not None
            expected = []
            for ms in occurrences(schedule.spec, after_ms=schedule.next_fire_at - 1):
                if ms > horizon:
                    break
                expected.append(ms)
            assert [at for at, _ in rows(db, schedule.id)] == expected
        db.close()
