"""The notifier: a failed run reaches the tenant's notification URL once, signed with the
tenant's secrets, retried after a 500 with the same key, and delivered again after a crash
once the dead notifier's lease has lapsed."""

from __future__ import annotations

import json
from collections.abc import Callable

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.envelope import render_event
from appliance.core.events import EventType
from appliance.core.notifications import idempotency_key
from appliance.core.signing import verify
from appliance.engine import notifier
from appliance.engine.delivery import Answer
from appliance.engine.notifier import Notifier, NotifierConfig
from appliance.store.active_secrets import active_secrets
from appliance.store.events import append_event, list_events
from appliance.store.infra.database import Database
from appliance.store.notifications import list_notifications, next_notification_due, set_target
from appliance.store.tenants import create_tenant
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0

DAILY_AT_T0 = "0 3 * * *"  # one occurrence at the start of each test
HOOK = "https://tenant.example/hook"  # the schedule's target (ScheduleRow's default)
FAILURES = "https://tenant.example/failures"


def notifications(endpoint: Endpoint) -> list[Received]:
    return [r for r in endpoint.requests if r.url == FAILURES]


async def test_a_failed_run_is_notified_once_signed_and_retried_with_the_same_key(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    engine_db.write_now(set_target, tenant_id=tenant, url=FAILURES, now=T0)
    make_schedule(cron=DAILY_AT_T0, max_attempts=1)
    answers = iter([500, 200])

    async def respond(request: Received, n: int) -> Answer:
        return reply(next(answers) if request.url == FAILURES else 503)

    endpoint = Endpoint(respond)
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(3600)
    (failed,) = [
        e
        for e in engine_db.read_now(list_events, tenant_id=tenant)
        if e.type is EventType.RUN_FAILED
    ]
    first, second = notifications(endpoint)
    key = idempotency_key(failed.id)
    assert [r.headers["X-Idempotency-Key"] for r in (first, second)] == [key, key]
    assert [r.headers["webhook-id"] for r in (first, second)] == [key, key]
    assert [r.headers["X-Attempt"] for r in (first, second)] == ["1", "2"]
    assert first.headers["X-Event-Type"] == "schedule.run.failed"
    assert json.loads(second.content) == render_event(failed)
    secrets = engine_db.read_now(active_secrets, tenant_id=tenant, now=T0)
    for request in (first, second):
        timestamp = int(request.headers["webhook-timestamp"])
        verify(
            secrets,
            key,
            timestamp,
            request.content,
            request.headers["webhook-signature"],
            now_s=timestamp,
        )
    waited_ms = (
        int(second.headers["X-Signature-Timestamp"]) - int(first.headers["X-Signature-Timestamp"])
    ) * 1000
    assert 4_000 - 1_000 <= waited_ms <= 6_000 + 1_000  # the first retry delay: 5 s ± 20 %
    (row,) = engine_db.read_now(list_notifications, tenant_id=tenant)
    assert (row.state, row.attempts, row.last_status) == ("delivered", 2, 200)


async def test_a_tenant_without_a_url_is_not_notified(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    make_schedule(cron=DAILY_AT_T0, max_attempts=1)
    endpoint = Endpoint(lambda request, n: _status(503))
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(600)
    assert [r.url for r in endpoint.requests] == [HOOK]
    assert engine_db.read_now(list_notifications, tenant_id=tenant) == []


async def test_a_notification_cut_short_by_a_crash_is_delivered_again_with_the_same_key(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    engine_db.write_now(set_target, tenant_id=tenant, url=FAILURES, now=T0)
    make_schedule(cron=DAILY_AT_T0, max_attempts=1)
    arrived = trio.Event()

    async def hang(request: Received, n: int) -> Answer:
        if request.url != FAILURES:
            return reply(503)
        arrived.set()
        await trio.sleep_forever()  # the process dies while the receiver holds the request
        raise AssertionError("unreachable")

    first = Endpoint(hang)
    async with running_engine(engine_db, wall, first):
        await arrived.wait()
    crashed_at = trio.current_time()
    second = Endpoint()
    async with running_engine(engine_db, wall, second):
        await trio.sleep(600)
    (lost,) = notifications(first)
    (again,) = notifications(second)
    assert again.headers["X-Idempotency-Key"] == lost.headers["X-Idempotency-Key"]
    assert second.arrived[0] - crashed_at >= NotifierConfig().lease_ms / 1000 - 1
    (row,) = engine_db.read_now(list_notifications, tenant_id=tenant)
    assert (row.state, row.attempts) == ("delivered", 2)


async def _status(status: int) -> Answer:
    return reply(status)


async def test_a_burst_of_commits_wakes_the_notifier_at_most_every_commit_wake_s(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A delivery burst commits ≈ 100 times a second; the notifier reads the outbox at
    most every ``commit_wake_s`` then, not once per commit — and the last commit of the
    burst, which queued a notification, still wakes it."""
    tenant = engine_db.write_now(create_tenant, name="acme", now=T0).tenant_id
    engine_db.write_now(set_target, tenant_id=tenant, url=FAILURES, now=T0)
    reads: list[float] = []

    def counted(conn: apsw.Connection) -> int | None:
        reads.append(trio.current_time())
        return next_notification_due(conn)

    monkeypatch.setattr(notifier, "next_notification_due", counted)
    endpoint = Endpoint()
    config = NotifierConfig()
    notify = Notifier(db=engine_db, clock=wall, client=endpoint, config=config)
    async with trio.open_nursery() as nursery:
        await nursery.start(notify.run)
        start = trio.current_time()
        for _ in range(200):  # one second of commits, none queuing anything
            await engine_db.write(lambda conn: None)
            await trio.sleep(0.005)
        failed = {"scheduled_for": "2026-01-01T03:00:00Z", "attempt": 1, "reason": "exhausted"}
        await engine_db.write(
            append_event, tenant_id=tenant, type=EventType.RUN_FAILED, now=wall.now_ms(),
            data=failed,
        )  # fmt: skip
        queued = trio.current_time()
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert len([t for t in reads if start <= t < queued]) <= 1 / config.commit_wake_s + 2
    (notified,) = notifications(endpoint)
    assert notified.headers["X-Event-Type"] == "schedule.run.failed"
    assert endpoint.arrived[0] - queued <= config.commit_wake_s + 0.01
