"""The dispatcher: signed deliveries, retries, leases kept alive or given up in time."""

from __future__ import annotations

from collections.abc import Callable

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.events import EventType
from appliance.core.ids import idempotency_key
from appliance.core.instants import format_instant, format_scheduled_for
from appliance.core.retry import TransportFailure
from appliance.core.runs import AttemptOutcome, RunState
from appliance.core.signing import verify
from appliance.engine.delivery import Answer, DeliveryFailed
from appliance.engine.dispatcher import DispatchConfig
from appliance.errors import StoreError
from appliance.store.active_secrets import active_secrets
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.runs import RunRecord, list_attempts, list_runs
from appliance.store.usecases.manual import replay_run
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0

DAILY_AT_T0 = "0 3 * * *"  # T0 is 03:00 UTC: one occurrence at the start of each test


def only_run(db: Database, tenant: str, schedule_id: str) -> RunRecord:
    (run,) = db.read_now(list_runs, tenant_id=tenant, schedule_id=schedule_id, limit=5)
    return run


def event_types(db: Database, tenant: str) -> list[EventType]:
    return [e.type for e in db.read_now(list_events, tenant_id=tenant)]


async def test_delivery_is_signed_and_carries_the_contract_headers(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)
    endpoint = Endpoint()
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(10)
    (request,) = endpoint.requests
    text = format_scheduled_for(T0)
    key = idempotency_key(sid, text)
    assert request.headers["X-Idempotency-Key"] == key
    assert request.headers["X-Scheduled-For"] == text
    assert request.headers["X-Attempt"] == "1" and request.headers["X-Schedule-Id"] == sid
    assert request.headers["X-Team"] == "billing" and request.content == b'{"n":1}'
    assert request.headers["User-Agent"] == "Steeple/test"
    secrets = engine_db.read_now(active_secrets, tenant_id=tenant, now=T0)
    timestamp = int(request.headers["X-Signature-Timestamp"])
    assert timestamp == T0 // 1000
    verify(
        secrets, key, timestamp, request.content, request.headers["X-Signature"], now_s=timestamp
    )
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.SUCCEEDED and run.last_status == 200
    (attempt,) = engine_db.read_now(list_attempts, run_id=run.id)
    assert attempt.outcome is AttemptOutcome.OK and attempt.response_excerpt == "ok"


async def test_retry_then_success_keeps_the_key_and_instant(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)

    async def flaky(request: Received, n: int) -> Answer:
        return reply(503, b"busy") if n == 1 else reply(200)

    endpoint = Endpoint(respond=flaky)
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(60)
    assert endpoint.header("X-Attempt") == ["1", "2"]
    assert len(set(endpoint.header("X-Idempotency-Key"))) == 1
    assert set(endpoint.header("X-Scheduled-For")) == {format_scheduled_for(T0)}
    gap = endpoint.arrived[1] - endpoint.arrived[0]
    assert 4.0 <= gap <= 6.0  # 5 s × U[0.8, 1.2]
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.SUCCEEDED and run.attempt == 2
    outcomes = [a.outcome for a in engine_db.read_now(list_attempts, run_id=run.id)]
    assert outcomes == [AttemptOutcome.RETRYABLE, AttemptOutcome.OK]
    events = engine_db.read_now(list_events, tenant_id=tenant)
    assert [e.type for e in events] == [EventType.RUN_RETRYING, EventType.RUN_SUCCEEDED]
    assert events[0].data["status"] == 503 and events[0].data["next_attempt_at"] is not None


async def test_gone_fails_the_run_and_pauses_the_schedule(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron="* * * * *")

    async def gone(request: Received, n: int) -> Answer:
        return reply(410)

    endpoint = Endpoint(respond=gone)
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(600)  # ten more occurrences would have fired
    assert len(endpoint.requests) == 1
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.FAILED and run.failure_reason == "gone"
    paused = engine_db.read_now(
        lambda c: c.execute("SELECT paused FROM schedules WHERE id = ?", (sid,)).fetchone()[0]
    )
    assert paused == 1
    assert event_types(engine_db, tenant) == [
        EventType.RUN_FAILED,
        EventType.SCHEDULE_PAUSED_BY_RECEIVER,
    ]


async def test_blocked_destination_fails_without_retry(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)

    async def blocked(request: Received, n: int) -> Answer:
        raise DeliveryFailed(TransportFailure.BLOCKED, "10.0.0.7 is a private address")

    endpoint = Endpoint(respond=blocked)
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(3600)
    assert len(endpoint.requests) == 1
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.FAILED and run.failure_reason == "destination_blocked"
    assert run.last_error is not None and "10.0.0.7" in run.last_error
    assert event_types(engine_db, tenant) == [EventType.RUN_FAILED]


async def test_retries_stop_when_attempts_are_exhausted(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0, max_attempts=3)

    async def broken(request: Received, n: int) -> Answer:
        return reply(500)

    endpoint = Endpoint(respond=broken)
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(3 * 3600)
    assert endpoint.header("X-Attempt") == ["1", "2", "3"]
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.FAILED and run.failure_reason == "exhausted"
    assert event_types(engine_db, tenant)[-1] is EventType.RUN_FAILED


async def test_concurrency_is_bounded(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    for _ in range(10):
        make_schedule(cron=DAILY_AT_T0)
    in_flight, peak = 0, 0

    async def slow(request: Received, n: int) -> Answer:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await trio.sleep(5)
        in_flight -= 1
        return reply(200)

    endpoint = Endpoint(respond=slow)
    config = DispatchConfig(concurrency=3, user_agent="Steeple/test")
    async with running_engine(engine_db, wall, endpoint, dispatch=config):
        await trio.sleep(60)
    assert peak == 3 and len(endpoint.requests) == 10
    # Freed slots are refilled at once (a nudge), not on a poll: 4 waves of 5 s.
    assert max(endpoint.arrived) - min(endpoint.arrived) < 15.1


async def test_claims_wait_for_a_batch_of_free_slots(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    """Concurrency 8, claim batch 3, 20 runs due at once, deliveries finishing one at a
    time: after the first claim of 8, every claim takes at least 3 runs (a claim per freed
    slot would take 1), and all 20 are delivered."""
    for _ in range(20):
        make_schedule(cron=DAILY_AT_T0)
    durations = iter(range(1, 21))

    async def staggered(request: Received, n: int) -> Answer:
        await trio.sleep(next(durations))  # each finishes alone
        return reply(200)

    endpoint = Endpoint(respond=staggered)
    config = DispatchConfig(concurrency=8, claim_batch=3, user_agent="Steeple/test")
    async with running_engine(engine_db, wall, endpoint, dispatch=config):
        await trio.sleep(600)
    assert len(endpoint.requests) == 20
    sizes = engine_db.read_now(
        lambda c: [
            n
            for (n,) in c.execute(
                "SELECT COUNT(*) FROM attempts GROUP BY started_at ORDER BY started_at"
            )
        ]
    )
    assert sizes[0] == 8 and sum(sizes) == 20
    assert all(n >= 3 for n in sizes[1:-1]), sizes  # the last claim takes what is left


def test_claim_batch_must_fit_the_concurrency() -> None:
    assert DispatchConfig(concurrency=32).min_claim == 8
    assert DispatchConfig(concurrency=3).min_claim == 1
    for bad in (0, 9):
        with pytest.raises(ValueError, match="claim_batch must be 1–8"):
            DispatchConfig(concurrency=8, claim_batch=bad)


async def test_heartbeats_keep_a_long_delivery_alive(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0, timeout_seconds=120)

    async def slow(request: Received, n: int) -> Answer:
        await trio.sleep(100)  # more than three leases long
        return reply(200)

    endpoint = Endpoint(respond=slow)
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(200)
    assert len(endpoint.requests) == 1  # the reaper never took it away
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.SUCCEEDED and run.attempt == 1
    (attempt,) = engine_db.read_now(list_attempts, run_id=run.id)
    assert attempt.outcome is AttemptOutcome.OK and attempt.latency_ms == 100_000


async def test_failing_renewals_cancel_a_delivery_before_its_lease_lapses(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0, timeout_seconds=120)
    cancelled_at: list[float] = []

    async def slow(request: Received, n: int) -> Answer:
        try:
            await trio.sleep(100)
        finally:
            cancelled_at.append(trio.current_time())
        return reply(200)

    def failing_renewal(
        conn: apsw.Connection, /, *, owner: str, now: int, lease_ms: int
    ) -> frozenset[str]:
        raise StoreError("the disk is full")

    endpoint = Endpoint(respond=slow)
    async with running_engine(engine_db, wall, endpoint, renew_leases=failing_renewal) as engine:
        await trio.sleep(29)
        assert engine.dispatcher.in_flight == 0  # given up before the 30 s lease
    started = endpoint.arrived[0]
    assert len(endpoint.requests) == 1 and endpoint.header("X-Schedule-Id") == [sid]
    assert cancelled_at[0] - started <= 28.0  # lease 30 s − margin 2 s
    run = only_run(engine_db, tenant, sid)
    assert run.state is RunState.RETRY_WAIT
    (attempt,) = engine_db.read_now(list_attempts, run_id=run.id)
    # Given up by its own executor, not timed out by the receiver: abandoned, taken back
    # then, and due again at once (a receiver's timeout would wait at least a minute).
    assert attempt.outcome is AttemptOutcome.ABANDONED
    assert attempt.error is not None and "lease" in attempt.error
    assert attempt.reclaimed_at == attempt.finished_at == run.due_at
    (event,) = engine_db.read_now(
        list_events, tenant_id=tenant, types=frozenset({EventType.RUN_RETRYING})
    )
    assert event.data["reason"] == "abandoned"
    assert event.data["next_attempt_at"] == format_instant(run.due_at)


async def test_a_lease_taken_back_stops_its_delivery_at_the_next_heartbeat(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    """Another executor took the run (its lease token changed): the heartbeat must not
    keep our delivery alive on a lease that is no longer ours."""
    sid = make_schedule(cron=DAILY_AT_T0, timeout_seconds=120)
    cancelled_at: list[float] = []

    async def slow(request: Received, n: int) -> Answer:
        try:
            await trio.sleep(100)
        finally:
            cancelled_at.append(trio.current_time())
        return reply(200)

    def take_back(conn: apsw.Connection) -> None:
        conn.execute(
            "UPDATE job_runs SET lease_owner = 'inc_other', lease_token = 'theirs'"
            " WHERE schedule_id = ?",
            (sid,),
        )

    endpoint = Endpoint(respond=slow)
    async with running_engine(engine_db, wall, endpoint) as engine:
        await trio.sleep(1)
        assert engine.dispatcher.in_flight == 1
        taken_at = trio.current_time()
        await engine_db.write(take_back)
        await trio.sleep(11)  # one heartbeat (every 10 s) later
        assert engine.dispatcher.in_flight == 0
    assert cancelled_at and cancelled_at[0] - taken_at <= 10.0
    (attempt,) = engine_db.read_now(list_attempts, run_id=only_run(engine_db, tenant, sid).id)
    assert attempt.outcome is AttemptOutcome.STALE  # its completion was fenced off


async def test_nothing_new_is_claimed_while_renewals_fail(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
) -> None:
    long = make_schedule(cron=DAILY_AT_T0, timeout_seconds=120)
    frequent = make_schedule(cron="* * * * * *", next_fire_at=T0 + 15_000)
    arrivals: dict[str, list[float]] = {long: [], frequent: []}

    async def record(request: Received, n: int) -> Answer:
        arrivals[request.headers["X-Schedule-Id"]].append(trio.current_time())
        if request.headers["X-Schedule-Id"] == long:
            await trio.sleep(100)
        return reply(200)

    def failing_renewal(
        conn: apsw.Connection, /, *, owner: str, now: int, lease_ms: int
    ) -> frozenset[str]:
        raise StoreError("the disk is full")

    endpoint = Endpoint(respond=record)
    async with running_engine(engine_db, wall, endpoint, renew_leases=failing_renewal):
        await trio.sleep(40)
    start = arrivals[long][0]
    # The heartbeat at +10 s fails: the every-second schedule, due from +15 s, gets nothing
    # while a lease is at risk. The long delivery is given up at +28 s; with nothing held,
    # the next heartbeat (+30 s) lets claiming resume and the backlog goes out.
    waits = [at - start for at in arrivals[frequent]]
    assert waits and min(waits) >= 28.0
    assert len(waits) >= 15


async def test_replay_redelivers_with_the_same_key(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    sid = make_schedule(cron=DAILY_AT_T0)
    endpoint = Endpoint()
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(10)
        run = only_run(engine_db, tenant, sid)
        await engine_db.write(replay_run, tenant_id=tenant, run_id=run.id, now=wall.now_ms())
        await trio.sleep(70)  # the dispatcher's longest sleep without a nudge is 60 s
    assert endpoint.header("X-Attempt") == ["1", "2"]
    assert len(set(endpoint.header("X-Idempotency-Key"))) == 1
    assert set(endpoint.header("X-Scheduled-For")) == {format_scheduled_for(T0)}
    assert only_run(engine_db, tenant, sid).state is RunState.SUCCEEDED


async def test_a_replay_gets_a_fresh_attempt_budget_and_retry_window(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    """Replaying an exhausted run eight days later (past the 7-day retry window) retries
    it up to max_attempts again; attempt numbers keep counting, the key never changes."""
    sid = make_schedule(cron=DAILY_AT_T0, max_attempts=2)

    async def broken(request: Received, n: int) -> Answer:
        return reply(500)

    endpoint = Endpoint(respond=broken)
    async with running_engine(engine_db, wall, endpoint):
        await trio.sleep(3600)
        run = only_run(engine_db, tenant, sid)
        assert run.state is RunState.FAILED and run.attempt == 2
        await engine_db.write(handle_pause, schedule_id=sid)
        wall.jump(8 * 86_400_000)
        await engine_db.write(replay_run, tenant_id=tenant, run_id=run.id, now=wall.now_ms())
        await trio.sleep(3600)
    assert endpoint.header("X-Attempt") == ["1", "2", "3", "4"]
    assert len(set(endpoint.header("X-Idempotency-Key"))) == 1
    replayed = only_run(engine_db, tenant, sid)
    assert replayed.state is RunState.FAILED and replayed.failure_reason == "exhausted"


def handle_pause(conn: apsw.Connection, *, schedule_id: str) -> None:
    """Stop planning new occurrences, so the only run is the replayed one."""
    conn.execute("UPDATE schedules SET paused = 1 WHERE id = ?", (schedule_id,))


async def test_drain_stops_claiming_and_waits_for_deliveries_in_flight(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    slow_id = make_schedule(cron=DAILY_AT_T0)
    make_schedule(cron="* * * * * *", next_fire_at=T0 + 5_000)

    async def respond(request: Received, n: int) -> Answer:
        if request.headers["X-Schedule-Id"] == slow_id:
            await trio.sleep(20)
        return reply(200)

    endpoint = Endpoint(respond=respond)
    async with running_engine(engine_db, wall, endpoint) as engine:
        await trio.sleep(1)
        await engine.dispatcher.drain()
        drained_at, delivered = trio.current_time(), len(endpoint.requests)
        await trio.sleep(30)
        assert len(endpoint.requests) == delivered  # nothing claimed after the drain
    assert drained_at >= endpoint.arrived[0] + 20  # it waited for the slow delivery
    assert only_run(engine_db, tenant, slow_id).state is RunState.SUCCEEDED
