"""The per-origin circuit breaker in the running engine: after the threshold of failures
nothing goes to the origin until a probe, runs wait uncharged with reason
``breaker_open``, a failed probe doubles the wait, a good one closes it — with an event
for each change."""

from __future__ import annotations

from collections.abc import Callable

import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.breaker import BreakerConfig
from appliance.core.events import EventType
from appliance.engine.delivery import Answer
from appliance.engine.dispatcher import DispatchConfig
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.runs import list_attempts, list_runs
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0

EVERY_SECOND = "* * * * * *"
BREAKER = BreakerConfig(threshold=3, first_wait_ms=10_000, max_wait_ms=40_000)


def down_until(seconds: float) -> Callable[[Received, int], object]:
    async def respond(request: Received, n: int) -> Answer:
        return reply(503, b"busy") if trio.current_time() < seconds else reply(200, b"ok")

    return respond


async def test_an_origin_that_keeps_failing_is_left_alone_between_probes(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=EVERY_SECOND, target_url="https://hooks.example.com/a")
    endpoint = Endpoint(respond=down_until(25))  # type: ignore[arg-type]
    dispatch = DispatchConfig(user_agent="Steeple/test", breaker=BREAKER)
    waiting_reasons: set[str | None] = set()
    async with running_engine(engine_db, wall, endpoint, dispatch=dispatch):
        await trio.sleep(20)
        runs = engine_db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=100)
        # Runs never sent that came due while it was open wait for it; the runs whose
        # 503s opened it wait for their own retry (its jittered delay may end later).
        waiting_reasons = {
            r.failure_reason for r in runs if r.state == "retry_wait" and r.attempt == 0
        }
        await trio.sleep(20)
    arrived = endpoint.arrived
    # Three 503s at 0, 1 and 2 s open it: nothing until the probe at 12 s, which fails
    # (down until 25 s) and doubles the wait: the next probe at 32 s succeeds.
    assert arrived[:3] == [0, 1, 2]
    assert [t for t in arrived if 2 < t < 32] == [12]
    after = [t for t in arrived if t >= 32]
    assert after[0] == 32 and len(after) > 5  # closed: the backlog and new runs flow
    assert waiting_reasons == {"breaker_open"}
    # Closing released every run that waited: none is left waiting for the breaker.
    runs = engine_db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=1000)
    assert [r.id for r in runs if r.failure_reason == "breaker_open"] == []
    assert all(r.state == "succeeded" for r in runs if 12 < (r.scheduled_for - T0) / 1000 < 32)
    # Waiting cost no attempt: every attempt row is a request the endpoint received.
    runs = engine_db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=1000)
    attempts = sum(len(engine_db.read_now(list_attempts, run_id=r.id)) for r in runs)
    assert attempts == len(endpoint.requests)
    events = engine_db.read_now(list_events, tenant_id=tenant, limit=1000)
    changes = [
        (e.type, e.data) for e in events
        if e.type in (EventType.BREAKER_OPENED, EventType.BREAKER_CLOSED)
    ]  # fmt: skip
    assert [type_ for type_, _ in changes] == [EventType.BREAKER_OPENED, EventType.BREAKER_CLOSED]
    assert changes[0][1]["origin"] == changes[1][1]["origin"] == "https://hooks.example.com:443"
    assert changes[0][1]["failures"] == 3


async def test_answers_that_are_not_failures_keep_it_closed(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    make_schedule(cron=EVERY_SECOND, target_url="https://hooks.example.com/a")

    async def not_found(request: Received, n: int) -> Answer:
        return reply(404, b"no")

    endpoint = Endpoint(respond=not_found)
    dispatch = DispatchConfig(user_agent="Steeple/test", breaker=BREAKER)
    async with running_engine(engine_db, wall, endpoint, dispatch=dispatch):
        await trio.sleep(9.5)  # occurrences 0-9: the one due at 10 s never races the stop
    # A 404 is an answer: never opened, each occurrence's first attempt on time.
    firsts = [
        t for r, t in zip(endpoint.requests, endpoint.arrived, strict=True)
        if r.headers["X-Attempt"] == "1"
    ]  # fmt: skip
    assert firsts == list(range(10))
    events = engine_db.read_now(list_events, tenant_id=tenant, limit=1000)
    assert EventType.BREAKER_OPENED not in {e.type for e in events}
