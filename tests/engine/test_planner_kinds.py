"""The planner with one-off, interval and bounded schedules (docs/schedules.md): catch-up
applies to them as to cron, and — a Hypothesis property — each occurrence inside the
bounds is materialised exactly once, and nothing outside them, whatever the clock does
and however often the appliance restarts."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from appliance.core.events import EventType
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.schedules import CatchupPolicy, PayloadKind, ScheduleSpec
from appliance.core.timing import occurrences
from appliance.errors import ValidationError
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.schedules import create_schedule, get_schedule
from appliance.store.tenants import create_tenant
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.store.conftest import T0

SECOND = 1000
HOUR = 3600 * SECOND
DAY = 24 * HOUR
CONFIG = PlannerConfig()


def spec(**timing: Any) -> ScheduleSpec:
    fields: dict[str, Any] = {
        "name": "kinds",
        "cron": "",
        "timezone": "UTC",
        "target_url": "https://tenant.example/hook",
        "payload_kind": PayloadKind.JSON,
        "body": b"{}",
        "content_type": "application/json",
        "headers": (),
        "jitter_seconds": 0,
        "catchup_policy": CatchupPolicy.ALL,
        "catchup_window_seconds": 3600,
        "timeout_seconds": 30,
        "paused": False,
    }
    fields.update(timing)
    return ScheduleSpec(**fields)


def plan_until_done(db: Database, now: int, cache: OccurrenceCache) -> None:
    while db.write_now(plan_once, now=now, config=CONFIG, occurrences=cache).more:
        pass


def rows(db: Database, schedule_id: str) -> list[tuple[int, str]]:
    def query(conn: apsw.Connection) -> list[tuple[int, str]]:
        return [
            (int(sched), str(state))
            for sched, state in conn.execute(
                "SELECT scheduled_for, state FROM job_runs WHERE schedule_id = ?"
                " ORDER BY scheduled_for",
                (schedule_id,),
            )
        ]

    return db.read_now(query)


def announced_misses(db: Database, tenant_id: str, schedule_id: str) -> int:
    events = db.read_now(
        list_events, tenant_id=tenant_id, limit=10_000, types=frozenset({EventType.RUN_MISSED})
    )
    return sum(int(e.data.get("count", 1)) for e in events if e.schedule_id == schedule_id)


def test_a_one_off_missed_during_downtime_follows_the_catchup_policy(engine_db: Database) -> None:
    tenant = engine_db.write_now(create_tenant, name="t", now=T0).tenant_id
    at = T0 + HOUR
    ids = {
        policy: engine_db.write_now(
            create_schedule, tenant_id=tenant, spec=spec(at=at, catchup_policy=policy), now=T0
        ).id
        for policy in CatchupPolicy
    }
    late = engine_db.write_now(
        create_schedule,
        tenant_id=tenant,
        spec=spec(at=at, catchup_window_seconds=600),
        now=T0,
    ).id
    plan_until_done(engine_db, at + 30 * 60 * SECOND, OccurrenceCache())  # down 30 min
    assert rows(engine_db, ids[CatchupPolicy.ALL]) == [(at, "pending")]
    assert rows(engine_db, ids[CatchupPolicy.LATEST]) == [(at, "pending")]  # the newest
    assert rows(engine_db, ids[CatchupPolicy.SKIP]) == [(at, "missed")]
    assert rows(engine_db, late) == [(at, "missed")]  # outside its 10 min window
    assert announced_misses(engine_db, tenant, ids[CatchupPolicy.SKIP]) == 1
    assert announced_misses(engine_db, tenant, late) == 1
    for sid in [*ids.values(), late]:
        schedule = engine_db.read_now(get_schedule, tenant_id=tenant, schedule_id=sid)
        assert schedule is not None and schedule.next_fire_at is None  # completed


@dataclass(frozen=True)
class Case:
    timing: dict[str, Any]
    policy: CatchupPolicy
    jitter: int
    steps: list[tuple[str, int]]  # ("jump", seconds) or ("restart", 0)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["every", "at", "cron"]))
    start = T0 + draw(st.integers(-DAY // SECOND, DAY // SECOND)) * SECOND
    length = draw(st.one_of(st.none(), st.integers(1, 2 * DAY // SECOND)))
    end = None if length is None else start + length * SECOND
    bounds = {"start_at": draw(st.sampled_from([start, None])), "end_at": end}
    if kind == "every":
        timing = {"every_seconds": draw(st.integers(1, 7200)), **bounds, "start_at": start}
    elif kind == "at":
        at = start + draw(st.integers(0, DAY // SECOND)) * SECOND
        timing = {"at": at, "start_at": None, "end_at": None}
    else:
        timing = {"cron": draw(st.sampled_from(["*/7 * * * *", "0 * * * *", "30 2 * * *"]))}
        timing.update(bounds)
    step = st.one_of(
        st.tuples(st.just("jump"), st.integers(-2 * DAY // SECOND, 3 * DAY // SECOND)),
        st.tuples(st.just("restart"), st.just(0)),
    )
    return Case(
        timing=timing,
        policy=draw(st.sampled_from(list(CatchupPolicy))),
        jitter=draw(st.sampled_from([0, 45])),
        steps=draw(st.lists(step, min_size=1, max_size=8)),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_each_occurrence_inside_the_bounds_is_materialised_once_under_jumps_and_restarts(
    case: Case,
) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / "steeple.db"
        db = Database.open(path, threaded=False)
        tenant = db.write_now(create_tenant, name="t", now=T0).tenant_id
        wanted = spec(catchup_policy=case.policy, jitter_seconds=case.jitter, **case.timing)
        try:
            created = db.write_now(create_schedule, tenant_id=tenant, spec=wanted, now=T0)
        except ValidationError:
            db.close()
            assume(False)  # a timing that never fires after T0 is refused: nothing to plan
            raise
        assert created.next_fire_at is not None
        now, cache = T0, OccurrenceCache()
        latest = None  # the latest instant the planner ran at: it runs after each step only
        for action, seconds in case.steps:
            if action == "restart":
                db.close()
                db, cache = Database.open(path, threaded=False), OccurrenceCache()
            else:
                now += seconds * SECOND
            plan_until_done(db, now, cache)
            latest = now if latest is None else max(latest, now)
        assert latest is not None
        horizon = latest + CONFIG.lookahead_ms
        expected = []
        for ms in occurrences(created.spec, after_ms=created.next_fire_at - 1):
            if ms > horizon:
                break
            expected.append(ms)
        found = rows(db, created.id)
        assert [sched for sched, _ in found] == expected  # once each, in bounds, none lost
        spec_ = created.spec
        assert all(spec_.start_at is None or s >= spec_.start_at for s, _ in found)
        assert all(spec_.end_at is None or s <= spec_.end_at for s, _ in found)
        missed = sum(state == "missed" for _, state in found)
        assert announced_misses(db, tenant, created.id) == missed
        db.close()
