"""The production delivery path inside the engine: planner, dispatcher and the real
delivery client against a real loopback receiver, in virtual time (the receiver's sleeps
are trio's, so 20 s of waiting take milliseconds)."""

from __future__ import annotations

from collections.abc import Callable

import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.runs import AttemptOutcome, RunState
from appliance.engine.delivery import DeliveryClient
from appliance.store.infra.database import Database
from appliance.store.runs import AttemptRecord, list_attempts, list_runs
from tests.engine.conftest import running_engine
from tests.engine.loopback import (
    LOOPBACK_ALLOWED,
    Respond,
    keep_alive_server,
    response,
)

DAILY_AT_T0 = "0 3 * * *"  # T0 is 03:00 UTC: one occurrence at the start of each test


def answer_after(seconds: float) -> Respond:
    async def respond(n: int) -> tuple[bytes, bool]:
        await trio.sleep(seconds)
        return response(b"done"), True

    return respond


def only_attempt(db: Database, tenant: str, sid: str) -> tuple[RunState, AttemptRecord]:
    (run,) = db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=5)
    (attempt,) = db.read_now(list_attempts, run_id=run.id)
    return run.state, attempt


async def deliver_once(db: Database, wall: TrioWallClock, for_s: float) -> None:
    async with DeliveryClient(LOOPBACK_ALLOWED) as client, running_engine(db, wall, client):
        await trio.sleep(for_s)


async def test_a_receiver_may_take_the_schedules_whole_timeout(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    """timeout_seconds 60 and an answer after 20 s: delivered. (A fixed 15 s read timeout
    once failed this with "no response data for 15 s".)"""
    async with keep_alive_server(answer_after(20)) as server:
        sid = make_schedule(cron=DAILY_AT_T0, timeout_seconds=60, target_url=server.url())
        await deliver_once(engine_db, wall, for_s=30)
    state, attempt = only_attempt(engine_db, tenant, sid)
    assert (state, attempt.outcome, attempt.http_status) == (RunState.SUCCEEDED,
                                                             AttemptOutcome.OK, 200)  # fmt: skip
    assert (attempt.latency_ms, attempt.response_excerpt) == (20_000, "done")
    assert len(server.raw) == 1


async def test_the_schedules_timeout_is_the_one_that_cuts_a_slow_receiver_off(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    async with keep_alive_server(answer_after(20)) as server:
        sid = make_schedule(cron=DAILY_AT_T0, timeout_seconds=8, target_url=server.url())
        await deliver_once(engine_db, wall, for_s=30)
    state, attempt = only_attempt(engine_db, tenant, sid)
    assert (state, attempt.outcome) == (RunState.RETRY_WAIT, AttemptOutcome.RETRYABLE)
    assert attempt.error == "no response within the 8 s deadline"
    assert attempt.latency_ms == 8_000
