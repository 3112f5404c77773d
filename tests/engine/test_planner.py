"""The planner: one run per occurrence whatever the clock does, catch-up after downtime."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.catch_up import MissReason
from appliance.core.cron import parse_cron
from appliance.core.events import EventType
from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import format_scheduled_for
from appliance.core.jitter import planned_occurrences
from appliance.engine.planner import Planner
from appliance.engine.wakeup import Wakeup
from appliance.store.events import SYSTEM_TENANT, list_events
from appliance.store.infra.database import Database
from appliance.store.materialise import store_body
from appliance.store.planning import earliest_cursor
from appliance.store.suspension import resume_tenant, suspend_tenant
from appliance.store.usecases.plan_pass import PlannerConfig, PlanResult, plan_once
from tests.engine.conftest import Endpoint, running_engine
from tests.store.conftest import T0

MINUTE = 60_000
HOUR = 60 * MINUTE
CONFIG = PlannerConfig()


def rows(db: Database, schedule_id: str) -> list[tuple[int, str, int]]:
    """(scheduled_for, state, due_at) of a schedule's runs, oldest first."""

    def query(conn: apsw.Connection) -> list[tuple[int, str, int]]:
        return [
            (sched, state, due)
            for sched, state, due in conn.execute(
                "SELECT scheduled_for, state, due_at FROM job_runs WHERE schedule_id = ?"
                " ORDER BY scheduled_for",
                (schedule_id,),
            )
        ]

    return db.read_now(query)


def cursor(db: Database, schedule_id: str) -> int | None:
    def query(conn: apsw.Connection) -> int | None:
        (value,) = conn.execute(
            "SELECT next_fire_at FROM schedules WHERE id = ?", (schedule_id,)
        ).fetchone()
        return None if value is None else int(value)

    return db.read_now(query)


def plan(db: Database, now: int, config: PlannerConfig = CONFIG) -> PlanResult:
    return db.write_now(plan_once, now=now, config=config)


def missed_events(db: Database, tenant: str) -> list[dict[str, Any]]:
    return [
        e.data
        for e in db.read_now(
            list_events, tenant_id=tenant, limit=1000, types=frozenset({EventType.RUN_MISSED})
        )
    ]


# --- one run per occurrence -------------------------------------------------------------


def test_plans_each_occurrence_once_and_moves_the_cursor_forward(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0)
    first = plan(engine_db, T0 - 1_000)  # within the 2 s lookahead of T0
    assert (first.materialised, first.next_fire_at) == (1, T0 + MINUTE)
    assert plan(engine_db, T0 - 1_000).materialised == 0  # same instant again: nothing new
    assert plan(engine_db, T0 + 3 * MINUTE).materialised == 3
    assert [r[0] for r in rows(engine_db, sid)] == [T0 + i * MINUTE for i in range(4)]
    assert cursor(engine_db, sid) == T0 + 4 * MINUTE
    assert plan(engine_db, T0).materialised == 0  # the clock went back: the cursor holds


def test_a_rewound_cursor_meets_the_unique_index(
    engine_db: Database, make_schedule: Callable[..., str], tenant: str
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0, catchup_policy="skip")
    plan(engine_db, T0 + 5 * MINUTE)
    before = rows(engine_db, sid)
    events = missed_events(engine_db, tenant)
    assert len(events) == 4  # T0..T0+3min were more than a minute late
    # A restore or a buggy writer puts the cursor back: the second guard holds.
    engine_db.write_now(
        lambda c: c.execute("UPDATE schedules SET next_fire_at = ? WHERE id = ?", (T0, sid))
    )
    assert plan(engine_db, T0 + 5 * MINUTE).materialised == 0
    assert rows(engine_db, sid) == before
    assert missed_events(engine_db, tenant) == events  # no event for a row not inserted


def test_a_pass_that_fails_midway_leaves_nothing_and_replans_cleanly(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    sids = [make_schedule(cron="* * * * *", next_fire_at=T0) for _ in range(3)]

    def crash_after_planning(conn: apsw.Connection, *, now: int) -> None:
        plan_once(conn, now=now, config=CONFIG)
        raise RuntimeError("killed mid-pass")

    with pytest.raises(RuntimeError):
        engine_db.write_now(crash_after_planning, now=T0 + 10 * MINUTE)
    assert all(rows(engine_db, sid) == [] and cursor(engine_db, sid) == T0 for sid in sids)
    assert plan(engine_db, T0 + 10 * MINUTE).materialised == 3 * 11
    for sid in sids:
        assert [r[0] for r in rows(engine_db, sid)] == [T0 + i * MINUTE for i in range(11)]


def test_jitter_is_stored_as_due_at_from_the_shared_function(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    sid = make_schedule(cron="*/5 * * * *", next_fire_at=T0, jitter_seconds=120)
    plan(engine_db, T0 + HOUR)
    spec = parse_cron("*/5 * * * *")
    expected = planned_occurrences(spec, schedule_id=sid, jitter_seconds=120, after_ms=T0 - 1)
    planned = [(r[0], r[2]) for r in rows(engine_db, sid)]
    assert planned == [(o.scheduled_for, o.due_at) for o, _ in zip(expected, planned, strict=False)]
    assert any(due > sched for sched, due in planned)
    assert all(sched <= due < sched + 120_000 for sched, due in planned)


def test_paused_and_deleted_schedules_are_not_planned(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    paused = make_schedule(paused=True)
    deleted = make_schedule(deleted_at=T0)
    assert plan(engine_db, T0 + HOUR).schedules == 0
    assert rows(engine_db, paused) == rows(engine_db, deleted) == []


# --- catch-up after downtime ------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "delivered"),
    [
        # Down from T0 to T0+3h, window 1 h: T0+2h..T0+3h is inside it (61 occurrences,
        # the last two not even misfired: at most a minute late).
        ("all", 61),
        ("latest", 3),  # the newest misfire (T0+2h58) and the two on time
        ("skip", 2),
    ],
)
def test_catch_up_policy_after_downtime(
    engine_db: Database,
    make_schedule: Callable[..., str],
    tenant: str,
    policy: str,
    delivered: int,
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0, catchup_policy=policy)
    result = plan(engine_db, T0 + 3 * HOUR)
    planned = rows(engine_db, sid)
    assert len(planned) == 181  # every occurrence has a row: nothing silently lost
    pending = [sched for sched, state, _ in planned if state == "pending"]
    assert len(pending) == result.materialised == delivered
    assert pending[-1] == T0 + 3 * HOUR
    if policy == "latest":
        assert pending == [T0 + 3 * HOUR - 2 * MINUTE, T0 + 3 * HOUR - MINUTE, T0 + 3 * HOUR]
    # Past 100 missed rows in one pass: one summary event per reason.
    summaries = {e["reason"]: e for e in missed_events(engine_db, tenant)}
    assert sum(e["count"] for e in summaries.values()) == 181 - delivered == result.missed
    window = summaries.pop(MissReason.OUTSIDE_WINDOW.value)
    assert window["count"] == 120  # T0 .. T0+1h59
    assert window["first_scheduled_for"] == format_scheduled_for(T0)
    assert window["last_scheduled_for"] == format_scheduled_for(T0 + 2 * HOUR - MINUTE)
    if policy == "all":
        assert summaries == {}
    else:
        reason = MissReason.SKIPPED if policy == "skip" else MissReason.SUPERSEDED
        (rest,) = summaries.values()
        assert rest["reason"] == reason.value and rest["count"] == 61 - delivered
        assert rest["first_scheduled_for"] == format_scheduled_for(T0 + 2 * HOUR)


def test_few_missed_rows_get_one_event_each(
    engine_db: Database, make_schedule: Callable[..., str], tenant: str
) -> None:
    make_schedule(cron="* * * * *", next_fire_at=T0, catchup_window_seconds=600)
    plan(engine_db, T0 + 20 * MINUTE)  # 21 occurrences, the 11 oldest outside the window
    events = missed_events(engine_db, tenant)
    assert [e["scheduled_for"] for e in events] == [
        format_scheduled_for(T0 + i * MINUTE) for i in range(10)
    ]
    assert {e["reason"] for e in events} == {MissReason.OUTSIDE_WINDOW.value}


def test_catch_up_is_bounded_per_pass_and_resumes(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    sid = make_schedule(cron="*/10 * * * * *", next_fire_at=T0)  # every 10 s
    now = T0 + HOUR
    first = plan(engine_db, now)
    assert first.more and first.materialised == CONFIG.max_catchup
    while plan(engine_db, now).more:
        pass
    states = [state for _, state, _ in rows(engine_db, sid)]
    assert len(states) == 361 and set(states) == {"pending"}  # all inside the window


def test_work_per_schedule_is_bounded_per_pass(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    sid = make_schedule(cron="* * * * * *", next_fire_at=T0, catchup_policy="skip")
    config = PlannerConfig(max_occurrences=1_000)
    passes = 1
    while plan(engine_db, T0 + 2_500_000, config).more:
        passes += 1
        assert passes < 10
    assert passes == 3 and len(rows(engine_db, sid)) == 2_501 + 2  # + the 2 s lookahead


# --- the service ------------------------------------------------------------------------


async def test_backwards_clock_jump_is_recorded_and_plans_nothing_twice(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
) -> None:
    sid = make_schedule(cron="*/30 * * * * *", next_fire_at=T0)
    planned: list[int] = []
    cursors: list[int] = []
    planner = Planner(
        db=engine_db,
        clock=wall,
        wakeup=Wakeup(),
        on_planned=lambda: planned.append(1),
        config=CONFIG,
    )
    for step in range(40):  # 20 virtual minutes, one pass per occurrence
        if step == 20:
            wall.jump(-HOUR)
        deadline = await planner.run_once()
        cursors.append(cursor(engine_db, sid) or 0)
        await trio.sleep_until(deadline)
    assert cursors == sorted(cursors)  # never backwards
    # One row per occurrence up to the jump; after it the wall clock is an hour behind the
    # cursor, so there is nothing to plan (and nothing is planned twice).
    assert [r[0] for r in rows(engine_db, sid)] == [T0 + i * 30_000 for i in range(20)]
    (jump,) = engine_db.read_now(list_events, tenant_id=SYSTEM_TENANT)
    assert jump.type is EventType.CLOCK_JUMP_DETECTED and jump.data["divergence_ms"] == -HOUR


async def test_a_day_of_hourly_firings_in_virtual_time(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
) -> None:
    sid = make_schedule(cron="0 * * * *", next_fire_at=T0)
    endpoint = Endpoint()
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(24 * HOUR / 1000 - 1)
    # 24 delivered; the next one (2 s lookahead) is planned and waits for its time.
    assert [r[1] for r in rows(engine_db, sid)] == ["succeeded"] * 24 + ["pending"]
    assert endpoint.header("X-Scheduled-For") == [
        format_scheduled_for(T0 + h * HOUR) for h in range(24)
    ]
    lateness = [at - endpoint.arrived[0] - h * HOUR / 1000 for h, at in enumerate(endpoint.arrived)]
    assert max(lateness) < 0.01  # delivered on time: woken by due_at, not by a poll


@pytest.mark.parametrize(
    ("policy", "first_delivered"),
    [
        ("all", 4 * HOUR),  # every occurrence inside the 1 h window, oldest first
        ("latest", 5 * HOUR - 5 * MINUTE),  # only the newest misfire, then the one on time
        ("skip", 5 * HOUR),  # only the occurrence that is not late
    ],
)
async def test_catch_up_after_a_forward_jump_delivers_per_policy(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
    policy: str,
    first_delivered: int,
) -> None:
    sid = make_schedule(cron="*/5 * * * *", next_fire_at=T0, catchup_policy=policy)
    wall.jump(5 * HOUR)  # the appliance was down for five hours
    endpoint = Endpoint()
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(60)
    expected = [
        format_scheduled_for(T0 + offset)
        for offset in range(first_delivered, 5 * HOUR + 1, 5 * MINUTE)
    ]
    assert sorted(endpoint.header("X-Scheduled-For")) == expected
    states = [state for _, state, _ in rows(engine_db, sid)]
    assert len(states) == 61 and states.count("succeeded") == len(expected)
    events = missed_events(engine_db, tenant)  # fewer than 100: one event per missed row
    assert len(events) == states.count("missed") == 61 - len(expected)
    assert [e["reason"] for e in events].count(MissReason.OUTSIDE_WINDOW.value) == 48


# --- one pass, many schedules -----------------------------------------------------------


def test_rows_carry_the_derived_ids_and_bodies_are_stored_once(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    same = [make_schedule(next_fire_at=T0, body=b'{"same":1}') for _ in range(3)]
    other = make_schedule(next_fire_at=T0, body=b"other", content_type="text/plain")
    assert plan(engine_db, T0).materialised == 4

    def query(conn: apsw.Connection) -> tuple[list[tuple[str, ...]], int]:
        runs = list(
            conn.execute("SELECT id, idempotency_key, schedule_id, body_digest FROM job_runs")
        )
        (bodies,) = conn.execute("SELECT COUNT(*) FROM bodies").fetchone()
        return runs, bodies

    runs, bodies = engine_db.read_now(query)
    text = format_scheduled_for(T0)
    expected_digests = {
        sid: engine_db.write_now(store_body, content_type="application/json", body=b'{"same":1}')
        for sid in same
    } | {other: engine_db.write_now(store_body, content_type="text/plain", body=b"other")}
    assert sorted(runs) == sorted(
        (run_id(sid, text), idempotency_key(sid, text), sid, expected_digests[sid])
        for sid in [*same, other]
    )
    assert bodies == 2


def test_a_schedule_that_no_longer_parses_stops_and_the_rest_are_planned(
    engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    broken = make_schedule(cron="0 0 31 2 *", next_fire_at=T0)  # stored before a stricter check
    fine = make_schedule(cron="* * * * *", next_fire_at=T0)
    result = plan(engine_db, T0)
    assert (result.schedules, result.materialised) == (2, 1)
    assert cursor(engine_db, broken) is None and rows(engine_db, broken) == []
    assert cursor(engine_db, fine) == T0 + MINUTE


def test_missed_events_follow_the_schedules_in_cursor_order(
    engine_db: Database, make_schedule: Callable[..., str], tenant: str
) -> None:
    later = make_schedule(
        cron="*/30 * * * *", next_fire_at=T0 + 30 * MINUTE, catchup_window_seconds=60
    )
    earlier = make_schedule(cron="*/20 * * * *", next_fire_at=T0, catchup_window_seconds=60)
    result = plan(engine_db, T0 + 2 * HOUR)
    assert result.missed == 6 + 3  # every occurrence but the one on time, outside the window

    def query(conn: apsw.Connection) -> list[tuple[str, str]]:
        return list(conn.execute("SELECT schedule_id, data FROM events ORDER BY seq"))

    order = [sid for sid, _ in engine_db.read_now(query)]
    assert order == [earlier] * 6 + [later] * 3
    assert [e["scheduled_for"] for e in missed_events(engine_db, tenant)] == [
        format_scheduled_for(T0 + minutes * MINUTE)
        for minutes in (0, 20, 40, 60, 80, 100, 30, 60, 90)
    ]


# --- suspended tenants ------------------------------------------------------------------


def test_a_suspended_tenant_plans_nothing_and_catches_up_per_policy_on_resume(
    engine_db: Database, make_schedule: Callable[..., str], tenant: str
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0, catchup_policy="skip")
    plan(engine_db, T0)
    assert [state for _, state, _ in rows(engine_db, sid)] == ["pending"]
    assert engine_db.write_now(suspend_tenant, tenant_id=tenant, now=T0 + 1000) == 1
    assert [state for _, state, _ in rows(engine_db, sid)] == ["cancelled"]
    assert plan(engine_db, T0 + HOUR).schedules == 0  # nothing planned while suspended
    assert len(rows(engine_db, sid)) == 1 and engine_db.read_now(earliest_cursor) is None
    assert engine_db.write_now(suspend_tenant, tenant_id=tenant, now=T0 + HOUR) is None
    assert engine_db.write_now(resume_tenant, tenant_id=tenant, now=T0 + HOUR)
    result = plan(engine_db, T0 + HOUR)
    states = [state for _, state, _ in rows(engine_db, sid)]
    # T0 cancelled; then as after downtime under `skip`: T0+1min .. T0+58min missed, the
    # last two (at most a minute late, not misfires) delivered.
    assert states == ["cancelled", *["missed"] * 58, "pending", "pending"]
    assert result.missed == 58 and result.materialised == 2
