"""Leadership among replicas (engine/leadership.py): one leader at a time, fail-over after
a lapsed term or at once after a resignation, and only the leader's planner plans."""

from __future__ import annotations

from collections.abc import Callable

import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.engine.leadership import Leadership, LeadershipConfig
from appliance.engine.planner import Planner
from appliance.engine.wakeup import Wakeup
from appliance.store.infra.database import Database
from appliance.store.usecases.plan_pass import PlannerConfig
from tests.store.conftest import T0

CONFIG = LeadershipConfig(term_ms=6_000)


class Elections:
    """Who was elected, in order, and an event per replica set when it is."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.events: dict[str, trio.Event] = {}

    def replica(self, db: Database, clock: TrioWallClock, name: str) -> Leadership:
        self.events[name] = trio.Event()

        def elected() -> None:
            self.order.append(name)
            self.events[name].set()

        return Leadership(
            db=db, clock=clock, incarnation_id=name, on_elected=elected, config=CONFIG
        )


async def test_one_leads_and_a_resignation_hands_over_at_the_next_renewal(
    autojump_clock: MockClock, engine_db: Database
) -> None:
    clock, elections = TrioWallClock(T0), Elections()
    a, b = (
        elections.replica(engine_db, clock, "inc_a"),
        elections.replica(engine_db, clock, "inc_b"),
    )
    async with trio.open_nursery() as nursery:
        scope_a = trio.CancelScope()

        async def run_a() -> None:
            with scope_a:
                await a.run()

        nursery.start_soon(run_a)
        await trio.sleep(0.01)
        await nursery.start(b.run)
        await trio.sleep(10)
        assert (a.leads(), b.leads(), elections.order) == (True, False, ["inc_a"])
        scope_a.cancel()  # a clean shutdown: inc_a resigns
        started = trio.current_time()
        await elections.events["inc_b"].wait()
        assert trio.current_time() - started <= CONFIG.renew_s + 0.01
        assert b.leads() and elections.order == ["inc_a", "inc_b"]
        nursery.cancel_scope.cancel()


async def test_a_silent_leader_is_replaced_once_its_term_lapses(
    autojump_clock: MockClock, engine_db: Database
) -> None:
    clock, elections = TrioWallClock(T0), Elections()
    a, b = (
        elections.replica(engine_db, clock, "inc_a"),
        elections.replica(engine_db, clock, "inc_b"),
    )
    await a.renew()  # inc_a leads, then goes silent (killed: no resignation)
    async with trio.open_nursery() as nursery:
        await nursery.start(b.run)
        started = trio.current_time()
        await elections.events["inc_b"].wait()
        waited = trio.current_time() - started
        assert (
            CONFIG.term_ms / 1000 - CONFIG.renew_s
            <= waited
            <= CONFIG.term_ms / 1000 + CONFIG.renew_s
        )
        assert not a.leads()  # its own clock says its term lapsed too
        nursery.cancel_scope.cancel()


async def test_a_replica_that_does_not_lead_plans_nothing(
    autojump_clock: MockClock, engine_db: Database, make_schedule: Callable[..., str]
) -> None:
    make_schedule(cron="* * * * * *", next_fire_at=T0)
    clock = TrioWallClock(T0 + 5_000)
    leading = False

    planner = Planner(
        db=engine_db,
        clock=clock,
        wakeup=Wakeup(),
        on_planned=lambda: None,
        config=PlannerConfig(),
        leads=lambda: leading,
    )

    def count() -> int:
        return int(
            engine_db.read_now(lambda c: c.execute("SELECT COUNT(*) FROM job_runs").fetchone()[0])
        )

    await planner.run_once()
    assert count() == 0
    leading = True
    await planner.run_once()
    assert count() > 0
