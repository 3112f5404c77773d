"""Under load the dispatcher's completions reach the store in batches: deliveries that
finish together are recorded by one call of
:func:`appliance.store.completions.complete_runs`, in one group commit. Real time and a
threaded database, as the appliance runs (the inline database of the other engine tests
writes each completion alone)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.runs import RunState
from appliance.engine import dispatcher
from appliance.engine.delivery import Answer
from appliance.engine.dispatcher import DispatchConfig
from appliance.store.completions import Finished, complete_runs
from appliance.store.infra.database import Database
from appliance.store.runs import RunRecord, list_runs
from tests.engine.conftest import Endpoint, Received, reply, running_engine

DAILY_AT_T0 = "0 3 * * *"  # T0 is 03:00 UTC: one occurrence at the start of the test
RUNS = 12


async def test_deliveries_that_finish_together_are_recorded_in_one_batch(
    inline_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schedules = [make_schedule(cron=DAILY_AT_T0) for _ in range(RUNS)]
    all_arrived = trio.Event()

    async def respond(request: Received, n: int) -> Answer:
        if n == RUNS:
            all_arrived.set()
        await all_arrived.wait()  # every delivery answers at the same moment
        return reply(200, b"ok")

    batches: list[int] = []

    def counted(conn: apsw.Connection, done: Sequence[Finished]) -> list[bool]:
        batches.append(len(done))
        return complete_runs(conn, done)

    monkeypatch.setattr(dispatcher, "complete_runs", counted)
    db = Database.open(inline_db.sqlite_file)  # the same file, threaded like production
    try:
        async with running_engine(db, wall, Endpoint(respond)):
            with trio.fail_after(20):
                while sum(batches) < RUNS:
                    await db.wait_for_commit()
    finally:
        db.close()
    # Together, not one call each (trio may wake them over two scheduling rounds: the
    # first call can take those already queued while the rest queue for the next).
    assert sum(batches) == RUNS and len(batches) <= RUNS // 2, batches
    for sid in schedules:
        (run,) = inline_db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=5)
        assert run.state is RunState.SUCCEEDED


async def test_a_slot_is_free_once_the_answer_is_in_while_its_outcome_is_recorded(
    autojump_clock: MockClock,
    inline_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One slot, two due runs, and outcomes that cannot be committed yet: the second run
    is claimed and sent while the first's outcome waits (so the claim can ride in the
    outcome's transaction); both runs stay held (the reaper spares their leases) and the
    drain waits until both are recorded."""
    schedules = [make_schedule(cron=DAILY_AT_T0) for _ in range(2)]
    commit = trio.Event()
    both_sent = trio.Event()
    write_batched = inline_db.write_batched

    async def slow_commit(fn: Callable[..., Sequence[bool]], item: Finished) -> bool:
        await commit.wait()
        return await write_batched(fn, item)

    async def respond(request: Received, n: int) -> Answer:
        if n == 2:
            both_sent.set()
        return reply(200, b"ok")

    monkeypatch.setattr(inline_db, "write_batched", slow_commit)
    one_slot = DispatchConfig(concurrency=1, user_agent="Steeple/test")
    drained = False
    async with running_engine(inline_db, wall, Endpoint(respond), dispatch=one_slot) as engine:
        with trio.fail_after(60):
            await both_sent.wait()
        states = {sid: _run(inline_db, tenant, sid).state for sid in schedules}
        assert set(states.values()) == {RunState.RUNNING}
        assert len(engine.dispatcher.held_leases()) == 2
        assert engine.dispatcher.in_flight == 2

        async def drain() -> None:
            nonlocal drained
            await engine.dispatcher.drain()
            drained = True

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            await trio.testing.wait_all_tasks_blocked()
            assert not drained  # two outcomes are still being written
            commit.set()
        assert drained and engine.dispatcher.in_flight == 0
    for sid in schedules:
        assert _run(inline_db, tenant, sid).state is RunState.SUCCEEDED


def _run(db: Database, tenant: str, schedule_id: str) -> RunRecord:
    (run,) = db.read_now(list_runs, tenant_id=tenant, schedule_id=schedule_id, limit=5)
    return run
