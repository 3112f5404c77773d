"""The engine as ``build_engine`` wires it: its nursery owns every service's errors, a nudge
reaches the planner and through it the dispatcher, and the checkpointer keeps the WAL
moving into the database file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import httpx
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.engine.checkpointer import Checkpointer, CheckpointerConfig
from appliance.store.infra.database import Database
from tests.engine.conftest import Endpoint, reply, running_engine
from tests.store.conftest import T0

DAILY_AT_T0 = "0 3 * * *"  # T0 is 03:00 UTC: one occurrence at the start of the test


async def test_a_crashing_service_stops_the_engine_and_its_error_reaches_the_caller(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
) -> None:
    make_schedule(cron=DAILY_AT_T0, timeout_seconds=120)

    async def slow(request: httpx.Request, n: int) -> httpx.Response:
        await trio.sleep(100)  # in flight when the first heartbeat (10 s) runs
        return reply(200)

    def broken_renewal(
        conn: apsw.Connection, /, *, owner: str, now: int, lease_ms: int
    ) -> frozenset[str]:
        raise RuntimeError("a bug in the heartbeat")

    endpoint = Endpoint(respond=slow)
    crashed = pytest.RaisesGroup(
        pytest.RaisesExc(RuntimeError, match="a bug in the heartbeat"), flatten_subgroups=True
    )
    with crashed:
        async with running_engine(engine_db, wall, endpoint, renew_leases=broken_renewal):
            await trio.sleep_forever()  # only the crash can end this
    assert len(endpoint.requests) == 1
    assert trio.current_time() == pytest.approx(10.0)  # at the first heartbeat, not later


async def test_a_nudge_wakes_the_planner_and_then_the_dispatcher_at_once(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
) -> None:
    """What the API calls after a write: the new schedule is planned and delivered now, not
    when the idle planner's maximum sleep (60 s) runs out."""
    delivered = trio.Event()

    async def record(request: httpx.Request, n: int) -> httpx.Response:
        delivered.set()
        return reply(200)

    async with running_engine(engine_db, wall, Endpoint(respond=record)) as engine:
        await trio.sleep(5)  # nothing to plan: both services asleep for their maximum
        make_schedule(cron=DAILY_AT_T0)  # its occurrence at T0 is already due
        engine.nudge()
        with trio.fail_after(1):
            await delivered.wait()


async def test_the_checkpointer_copies_the_wal_into_the_database_file(
    autojump_clock: MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "steeple.db"
    db = Database.open(path, threaded=False)  # the migrations' pages sit in the WAL
    try:
        before = path.stat().st_size
        async with trio.open_nursery() as nursery:
            wall = TrioWallClock(T0)
            assert wall.now_ms() == T0  # wall time starts now
            checkpointer = Checkpointer(db=db, clock=wall, config=CheckpointerConfig(interval_s=60))
            await nursery.start(checkpointer.run)
            await trio.sleep(59)
            assert path.stat().st_size == before and db.last_checkpoint is None
            await trio.sleep(2)
            assert path.stat().st_size > before
            done = db.last_checkpoint
            assert done is not None and done.at_ms == T0 + 60_000
            assert done.wal_frames > 0 and done.held_back_frames == 0
            nursery.cancel_scope.cancel()
    finally:
        db.close()
