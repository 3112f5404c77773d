"""Reclaim: lapsed leases (the reaper) and dead incarnations (boot), same key afterwards."""

from __future__ import annotations

from collections.abc import Callable

import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.instants import format_scheduled_for
from appliance.core.runs import AttemptOutcome, RunState
from appliance.engine.delivery import Answer
from appliance.engine.dispatcher import DispatchConfig
from appliance.engine.reaper import Reaper, ReaperConfig, reap_once
from appliance.engine.wakeup import Wakeup
from appliance.store.claims import claim_runs
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.runs import RunRecord, list_attempts, list_runs
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.usecases.reclaim import reclaim_previous
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0

LEASE = 30_000
DAILY_AT_T0 = "0 3 * * *"


def only_run(db: Database, tenant: str, schedule_id: str) -> RunRecord:
    (run,) = db.read_now(list_runs, tenant_id=tenant, schedule_id=schedule_id, limit=5)
    return run


def outcomes(db: Database, run_id: str) -> list[AttemptOutcome | None]:
    return [a.outcome for a in db.read_now(list_attempts, run_id=run_id)]


def test_reap_once_returns_lapsed_leases_due_now(
    engine_db: Database, make_schedule: Callable[..., str], tenant: str
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)
    engine_db.write_now(plan_once, now=T0, config=PlannerConfig())
    engine_db.write_now(claim_runs, owner="inc_dead", now=T0, lease_ms=LEASE, limit=5)
    config = ReaperConfig()
    early = engine_db.write_now(reap_once, now=T0 + LEASE, config=config)
    assert (early.reclaimed, early.next_expiry) == (0, T0 + LEASE)  # not before it lapses
    late = engine_db.write_now(reap_once, now=T0 + LEASE + 1, config=config)
    assert (late.reclaimed, late.next_expiry, late.more) == (1, None, False)
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.RETRY_WAIT and run.due_at == T0 + LEASE + 1
    assert outcomes(engine_db, run.id) == [AttemptOutcome.ABANDONED]


async def test_the_reaper_wakes_when_the_lease_lapses(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)
    await engine_db.write(plan_once, now=wall.now_ms(), config=PlannerConfig())
    await engine_db.write(claim_runs, owner="inc_dead", now=wall.now_ms(), lease_ms=LEASE, limit=5)
    reclaimed: list[float] = []
    reaper = Reaper(
        db=engine_db,
        clock=wall,
        on_reclaimed=lambda: reclaimed.append(trio.current_time()),
        wakeup=Wakeup(),
    )
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        await trio.sleep(45)
        nursery.cancel_scope.cancel()
    assert len(reclaimed) == 1
    assert reclaimed[0] - start <= LEASE / 1000 + 0.01  # slept until the lapse, no poll
    assert only_run(engine_db, tenant, sid).state is RunState.RETRY_WAIT


async def test_a_reclaimed_run_is_redelivered_with_the_same_key(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)
    await engine_db.write(plan_once, now=wall.now_ms(), config=PlannerConfig())
    (dead,) = (
        await engine_db.write(
            claim_runs, owner="inc_dead", now=wall.now_ms(), lease_ms=LEASE, limit=5
        )
    ).runs
    endpoint = Endpoint()
    start = trio.current_time()
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(60)
    assert endpoint.header("X-Attempt") == ["2"]
    assert endpoint.header("X-Idempotency-Key") == [dead.idempotency_key]
    assert endpoint.header("X-Scheduled-For") == [format_scheduled_for(T0)]
    assert endpoint.arrived[0] - start <= LEASE / 1000 + 0.01
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.SUCCEEDED
    assert outcomes(engine_db, run.id) == [AttemptOutcome.ABANDONED, AttemptOutcome.OK]


async def test_boot_reclaim_redelivers_at_once(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)
    old = await engine_db.write(register_incarnation, pid=1, now=wall.now_ms())
    await engine_db.write(plan_once, now=wall.now_ms(), config=PlannerConfig())
    await engine_db.write(claim_runs, owner=old, now=wall.now_ms(), lease_ms=LEASE, limit=5)
    await trio.sleep(5)  # the old process dies mid-delivery; the new one boots 5 s later

    new = await engine_db.write(register_incarnation, pid=2, now=wall.now_ms())
    assert await engine_db.write(reclaim_previous, incarnation_id=new, now=wall.now_ms()) == 1
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.RETRY_WAIT and run.due_at == wall.now_ms()
    assert outcomes(engine_db, run.id) == [AttemptOutcome.ABANDONED]

    endpoint = Endpoint()
    start = trio.current_time()
    async with running_engine(engine_db, wall, endpoint, incarnation_id=new):
        await trio.sleep(10)
    assert endpoint.header("X-Attempt") == ["2"]
    assert endpoint.arrived[0] - start < 0.01  # no waiting for the old lease to lapse
    assert only_run(engine_db, tenant, sid).state is RunState.SUCCEEDED


async def test_after_a_forward_clock_step_the_reaper_leaves_a_live_delivery_to_its_heartbeat(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    """The wall clock steps past a lease while its delivery is in flight. The lease has
    lapsed in the database's terms, but not by this process's monotonic clock: the reaper
    spares it (were it to reclaim, the run would be claimed and sent again while the first
    attempt still ran, until the next heartbeat cut that one). The heartbeat then finds
    the lease unrenewable and gives the attempt up, and the run goes out again at once —
    never two deliveries of it at the same time."""
    sid = make_schedule(cron=DAILY_AT_T0, timeout_seconds=120)
    in_flight: list[int] = []
    overlaps: list[tuple[int, ...]] = []

    async def respond(request: Received, n: int) -> Answer:
        in_flight.append(n)
        overlaps.extend([tuple(in_flight)] if len(in_flight) > 1 else [])
        try:
            if n == 1:
                await trio.sleep(90)  # slow: still sending when the wall clock steps
            return reply(200)
        finally:
            in_flight.remove(n)

    endpoint = Endpoint(respond=respond)
    async with running_engine(engine_db, wall, endpoint) as engine:
        await trio.sleep(5)
        assert engine.dispatcher.in_flight == 1 and engine.reaper is not None
        wall.jump(40_000)  # past the 30 s lease, 5 s before the next heartbeat
        await engine.reaper.run_once()  # the reaper wakes first (any reason will do)
        await trio.sleep(60)
    assert overlaps == []
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.SUCCEEDED
    assert outcomes(engine_db, run.id) == [AttemptOutcome.ABANDONED, AttemptOutcome.OK]
    heartbeat_s = DispatchConfig().heartbeat_ms / 1000
    assert endpoint.arrived[1] - endpoint.arrived[0] <= heartbeat_s + 0.01  # then at once
