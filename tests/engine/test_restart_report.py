"""The downtime report of a restart: an appliance died with runs in flight, stayed down
nine minutes, and started again (virtual time, a real database file).

Four every-minute schedules: catch-up ``all`` (1 h window), ``all`` with a 5 min window,
``latest`` and ``skip``. The report must count, per policy, exactly the occurrences the
downtime left behind that the restart then delivered late or recorded as missed — not the
runs the dead process had in flight (the boot reclaim's), not what comes after the start.
"""

from __future__ import annotations

from collections.abc import Callable

import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.downtime import DowntimeReport, format_duration
from appliance.core.events import EventType
from appliance.core.instants import format_scheduled_for
from appliance.core.runs import AttemptOutcome, Transition
from appliance.core.schedules import CatchupPolicy
from appliance.engine.assembly import EngineConfig, build_engine
from appliance.engine.dispatcher import DispatchConfig
from appliance.engine.liveness import LivenessConfig
from appliance.engine.restarts import report_restart
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.events import SYSTEM_TENANT, list_events
from appliance.store.incarnations import (
    PreviousIncarnation,
    end_incarnation,
    mark_seen,
    previous_incarnation,
    register_incarnation,
)
from appliance.store.infra.database import Database
from appliance.store.restarts import last_restart
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.usecases.reclaim import reclaim_previous
from tests.engine.conftest import Endpoint, running_engine
from tests.store.conftest import T0

MINUTE = 60_000
SEEN = T0 + MINUTE + 5_000  # the dead process's last liveness mark
FINISHED = SEEN + 2_000  # … and, after it, the last run it finished: its last sign of life
BOOT = T0 + 10 * MINUTE + 30_000  # the restart
ALL, LATEST, SKIP = CatchupPolicy.ALL, CatchupPolicy.LATEST, CatchupPolicy.SKIP
OK = Completion(
    outcome=AttemptOutcome.OK,
    transition=Transition.SUCCEED,
    due_at=None,
    failure_reason=None,
    http_status=200,
    error=None,
    latency_ms=5,
    response_excerpt="ok",
)


def four_schedules(make_schedule: Callable[..., str]) -> None:
    """Each delivered up to T0 by the process that will die."""
    for policy, window in (("all", 3600), ("all", 300), ("latest", 3600), ("skip", 3600)):
        make_schedule(
            next_fire_at=T0 + MINUTE, catchup_policy=policy, catchup_window_seconds=window
        )


def run_then_die(db: Database, *, clean: bool) -> None:
    """The previous process: plans T0+1m, claims its four runs (attempts started), marks
    itself seen, finishes one of them, then dies with three in flight — or, ``clean``,
    ends at its mark without having claimed anything."""
    dead = db.write_now(register_incarnation, pid=1, now=T0 - 60 * MINUTE)
    db.write_now(plan_once, now=T0 + MINUTE - 1_000, config=PlannerConfig())
    claimed = (
        ()
        if clean
        else db.write_now(claim_runs, owner=dead, now=T0 + MINUTE, lease_ms=60_000, limit=10).runs
    )
    db.write_now(mark_seen, incarnation_id=dead, now=SEEN)
    if clean:
        db.write_now(end_incarnation, incarnation_id=dead, now=SEEN)
    else:
        assert len(claimed) == 4
        assert db.write_now(complete_run, run=claimed[0], completion=OK, now=FINISHED)


async def restart(
    db: Database, endpoint: Endpoint, *, deliver_for_s: float = 20
) -> tuple[DowntimeReport, PreviousIncarnation]:
    """What the runtime does at boot, then ``deliver_for_s`` of virtual delivery time
    (less than the 30 s to the next occurrence)."""
    wall = TrioWallClock(BOOT)
    current = await db.write(register_incarnation, pid=2, now=wall.now_ms())
    previous = await db.read(previous_incarnation, incarnation_id=current)
    assert previous is not None
    reclaimed = await db.write(reclaim_previous, incarnation_id=current, now=BOOT)
    async with running_engine(db, wall, endpoint, incarnation_id=current) as engine:
        assert engine.planner is not None
        report = await report_restart(
            db=db,
            clock=wall,
            previous=previous,
            restarted_at=BOOT,
            reclaimed=reclaimed,
            restored_at=None,
            caught_up=engine.planner.caught_up,
        )
        await trio.sleep(deliver_for_s)
    return report, previous


async def test_a_crash_reports_downtime_late_and_missed_per_policy(
    autojump_clock: MockClock,
    engine_db: Database,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    four_schedules(make_schedule)
    run_then_die(engine_db, clean=False)
    endpoint = Endpoint()
    report, previous = await restart(engine_db, endpoint)

    assert (report.down_since, report.downtime_ms) == (FINISHED, BOOT - FINISHED)
    assert previous.ended_at is None and not report.clean_shutdown
    assert (previous.last_seen_at, previous.last_finished_at) == (SEEN, FINISHED)
    # Scheduled while down: T0+2m … T0+10m, nine per schedule. `all`: nine, and five of
    # the 5-minute window's (T0+2m … T0+5m are older than it). `latest`: the newest misfire
    # (T0+9m) and the one on time (T0+10m, 30 s late). `skip`: only the one on time.
    assert report.late == {ALL: 9 + 5, LATEST: 2, SKIP: 1}
    assert report.missed == {ALL: 4, LATEST: 7, SKIP: 8}
    assert report.reclaimed == 3  # T0+1m, in flight when it died: redelivered, not "late"

    delivered = endpoint.header("X-Scheduled-For")
    assert len(delivered) == 17 + 3 and all(s < format_scheduled_for(BOOT) for s in delivered)
    assert delivered.count(format_scheduled_for(T0 + MINUTE)) == 3

    # One event, in the system's feed and so in every tenant's, equal to the report.
    (event,) = engine_db.read_now(
        list_events,
        tenant_id=tenant,
        limit=100,
        types=frozenset({EventType.APPLIANCE_RESTARTED}),
    )
    assert event.tenant_id == SYSTEM_TENANT and event.data == report.event_data()
    assert event.data["late"] == 17 and event.data["missed"] == 19
    shown = engine_db.read_now(last_restart)
    assert shown is not None and shown.data == event.data


async def test_a_clean_stop_reports_from_its_end_and_nothing_reclaimed(
    autojump_clock: MockClock,
    engine_db: Database,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    four_schedules(make_schedule)
    run_then_die(engine_db, clean=True)
    report, previous = await restart(engine_db, Endpoint())
    assert previous.ended_at == SEEN and report.clean_shutdown
    assert report.reclaimed == 0 and report.downtime_ms == BOOT - SEEN
    # T0+1m (planned, not attempted) was due before the stop: overdue then, not the
    # downtime's; it is delivered, but not counted.
    assert report.late == {ALL: 9 + 5, LATEST: 2, SKIP: 1}
    assert report.missed == {ALL: 4, LATEST: 7, SKIP: 8}
    assert "after a clean stop: down 9m 25s" in report.summary()


async def test_the_running_appliance_marks_itself_seen(
    autojump_clock: MockClock, engine_db: Database
) -> None:
    wall = TrioWallClock(T0)
    current = await engine_db.write(register_incarnation, pid=1, now=T0)
    engine = build_engine(
        db=engine_db,
        clock=wall,
        client=Endpoint(),
        incarnation_id=current,
        config=EngineConfig(
            dispatch=DispatchConfig(user_agent="Steeple/test"),
            liveness=LivenessConfig(interval_s=5),
        ),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(engine.run)
        await trio.sleep(12)
        nursery.cancel_scope.cancel()
    later = await engine_db.write(register_incarnation, pid=2, now=T0 + 60_000)
    previous = await engine_db.read(previous_incarnation, incarnation_id=later)
    assert previous is not None and previous.id == current
    assert previous.last_seen_at == T0 + 10_000 and previous.stopped_at == T0 + 10_000


def test_a_wall_clock_stepped_back_reports_no_negative_downtime() -> None:
    report = DowntimeReport(
        previous_incarnation="inc_x",
        down_since=T0,
        restarted_at=T0 - 5_000,
        clean_shutdown=True,
        reclaimed=0,
        late={},
        missed={},
    )
    assert report.downtime_ms == 0 and report.event_data()["late_skip"] == 0
    assert [format_duration(ms) for ms in (6_700, 245_000, 3_723_000)] == [
        "6.7s",
        "4m 05s",
        "1h 02m 03s",
    ]
