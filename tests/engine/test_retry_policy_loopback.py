"""A schedule's retry policy in the running engine, against a real loopback receiver, in
virtual time (docs/schedules.md, "Retry policy"): the policy is stored with the schedule
and every decision about its runs follows it."""

from __future__ import annotations

import itertools
from typing import Any

import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.runs import AttemptOutcome, RunState
from appliance.core.schedule_input import parse_schedule
from appliance.engine.delivery import DeliveryClient
from appliance.store.infra.database import Database
from appliance.store.runs import AttemptRecord, RunRecord, list_attempts, list_runs
from appliance.store.schedules import create_schedule
from tests.engine.conftest import running_engine
from tests.engine.loopback import LOOPBACK_ALLOWED, Respond, keep_alive_server, response
from tests.store.conftest import T0


def create(db: Database, tenant: str, url: str, retry: dict[str, Any], **fields: Any) -> str:
    """A schedule made from tenant JSON, as the API makes it: firing at T0 (03:00)."""
    document = {
        "name": "retry policy",
        "cron": "0 3 * * *",
        "target_url": url,
        "payload": {"n": 1},
        "retry": retry,
    }
    if "payload_template" in fields:
        del document["payload"]
    spec = parse_schedule({**document, **fields}, policy=LOOPBACK_ALLOWED)
    return db.write_now(create_schedule, tenant_id=tenant, spec=spec, now=T0 - 1000).id


def answers(*replies: bytes) -> Respond:
    async def respond(n: int) -> tuple[bytes, bool]:
        return replies[min(n, len(replies)) - 1], True

    return respond


async def deliver(db: Database, wall: TrioWallClock, respond: Respond, *, sid_of: Any) -> Any:
    async with keep_alive_server(respond) as server:
        sid = sid_of(server.url())
        async with DeliveryClient(LOOPBACK_ALLOWED) as client, running_engine(db, wall, client):
            await trio.sleep(3600)
    return sid, server


def the_run(db: Database, tenant: str, sid: str) -> tuple[RunRecord, list[AttemptRecord]]:
    (run,) = db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=5)
    return run, db.read_now(list_attempts, run_id=run.id)


async def test_backoff_1_1_and_three_attempts_fail_after_exactly_three(
    autojump_clock: MockClock, engine_db: Database, wall: TrioWallClock, tenant: str
) -> None:
    error = response(b"boom", status="500 Internal Server Error")
    sid, server = await deliver(
        engine_db,
        wall,
        answers(error),
        sid_of=lambda url: create(engine_db, tenant, url, {"max_attempts": 3, "backoff": [1, 1]}),
    )
    run, attempts = the_run(engine_db, tenant, sid)
    assert (run.state, run.failure_reason) == (RunState.FAILED, "exhausted")
    assert [a.http_status for a in attempts] == [500, 500, 500]
    assert len(server.raw) == 3
    gaps = [b.started_at - a.started_at for a, b in itertools.pairwise(attempts)]
    assert all(800 <= gap <= 1300 for gap in gaps), gaps  # 1 s × [0.8, 1.2), plus latency


async def test_503_retry_after_is_honoured(
    autojump_clock: MockClock, engine_db: Database, wall: TrioWallClock, tenant: str
) -> None:
    busy = response(b"later", "Retry-After: 120", status="503 Service Unavailable")
    sid, _server = await deliver(
        engine_db,
        wall,
        answers(busy, response()),
        sid_of=lambda url: create(engine_db, tenant, url, {"backoff": [1]}),
    )
    run, attempts = the_run(engine_db, tenant, sid)
    assert run.state is RunState.SUCCEEDED
    assert [a.http_status for a in attempts] == [503, 200]
    assert attempts[1].started_at - attempts[0].started_at >= 120_000  # not the 1 s backoff


async def test_a_status_the_policy_does_not_retry_fails_the_run_at_once(
    autojump_clock: MockClock, engine_db: Database, wall: TrioWallClock, tenant: str
) -> None:
    invalid = response(b"no", status="422 Unprocessable Content")
    sid, server = await deliver(
        engine_db,
        wall,
        answers(invalid),
        sid_of=lambda url: create(engine_db, tenant, url, {"non_retryable_status": [422]}),
    )
    run, attempts = the_run(engine_db, tenant, sid)
    assert (run.state, run.failure_reason) == (RunState.FAILED, "non_retryable_status")
    assert [(a.http_status, a.outcome) for a in attempts] == [(422, AttemptOutcome.PERMANENT)]
    assert len(server.raw) == 1
