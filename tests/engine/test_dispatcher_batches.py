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

from appliance.clock import TrioWallClock
from appliance.core.runs import RunState
from appliance.engine import dispatcher
from appliance.engine.delivery import Answer
from appliance.store.completions import Finished, complete_runs
from appliance.store.database import Database
from appliance.store.runs import list_runs
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
    db = Database.open(inline_db.path)  # the same file, threaded like production
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
