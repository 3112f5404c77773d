"""Scenario 6 — event-loop starvation: the trio loop blocked by a synchronous call.

Blocking the loop is modelled honestly: a synchronous ``time.sleep`` inside a task (here
the tenant endpoint's handler, which runs on the appliance's loop through the in-memory
fake exchange) stops every task — heartbeats, the reaper, the planner — for that
long, in real time. Virtual time cannot model this (autojump never fires while the loop
is busy), so these runs are real-time and short: a lease of 1.5 s, heartbeats every
0.5 s, a 0.1 s safety margin — ADR 0033's 30 s / 10 s / 2 s scaled down 20× (the margin
a bit more).

One run is delivered while the loop blocks. A second *observer* reaper runs in its own OS
thread on its own connection, reaping every 20 ms with the real wall clock: it is what
another executor sharing the file (the PostgreSQL scale-out path, or H8's executor
processes) would do, and it keeps running while the appliance's loop is stuck.

- **1.5 × heartbeat (0.75 s)**: no premature reclaim. The lease outlives the block (at
  worst 1.5 − 0.75 s of slack remain), so neither the observer nor the appliance's own
  reaper reclaims; the delivery (2.75 s in all, longer than the lease) succeeds on its
  first attempt with heartbeats carrying it.
- **3 × lease (4.5 s)**: the lease lapses during the block and the observer reclaims the
  run. When the loop resumes, the blocked attempt's cancel scope has expired (its
  deadline is the last renewal + lease − margin), so the delivery is cut short, and its
  completion is fenced: recorded ``stale``, nothing else written. The run is redelivered
  (same key) and succeeds; the attempts table shows no overlapping leases
  (:func:`tests.chaos.recorder.lease_violations`).
- **3 × lease, no other executor**: the appliance's own reaper and the cut-short attempt
  wake together; whichever commits first wins, fenced on the lease token — the attempt is
  recorded ``abandoned`` (given up; nobody had taken the lease) or the reaper reclaims and
  the late completion is ``stale``. Never both: no outcome is written for an attempt whose
  lease a reclaim took (``outcomes_after_lease_loss``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from appliance.clock import SystemClock, TrioWallClock
from appliance.engine.delivery import Answer
from appliance.engine.dispatcher import DispatchConfig
from appliance.engine.reaper import ReaperConfig, reap_once
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.runs import list_attempts, list_runs
from appliance.store.tenants import create_tenant
from appliance.store.usecases.manual import trigger_schedule
from tests.chaos.recorder import lease_violations, publish
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0, ScheduleRow, insert_schedule

LEASE_MS, HEARTBEAT_MS, MARGIN_MS = 1_500, 500, 100
CONFIG = DispatchConfig(
    lease_ms=LEASE_MS, heartbeat_ms=HEARTBEAT_MS, margin_ms=MARGIN_MS, user_agent="Steeple/chaos"
)
YEARLY = "0 0 1 1 *"  # never fires during the test: the run is triggered by hand


@dataclass
class Observer:
    """Another executor's reaper, in its own thread, on its own connection."""

    path: Path
    reclaimed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        db = Database.open(self.path, threaded=False, readers=1)
        clock = SystemClock()
        try:
            while not self.stop.is_set():
                result = db.write_now(reap_once, now=clock.now_ms(), config=ReaperConfig())
                self.reclaimed += result.reclaimed
                self.stop.wait(0.02)
        finally:
            db.close()


@contextmanager
def observing(path: Path, enabled: bool) -> Iterator[Observer]:
    observer = Observer(path)
    thread = threading.Thread(target=observer.run, name="observer-reaper", daemon=True)
    if enabled:
        thread.start()
    try:
        yield observer
    finally:
        observer.stop.set()
        if enabled:
            thread.join(timeout=10)


@dataclass
class BlockingEndpoint:
    """The first request: 1 s of honest waiting, then the loop blocked for ``block_s``,
    then 1 s more; later requests answer at once. ``done`` is set once request number
    ``last`` is over (answered, or cancelled by its delivery's deadline)."""

    block_s: float
    last: int
    done: trio.Event = field(default_factory=trio.Event)

    async def respond(self, request: Received, n: int) -> Answer:
        try:
            if n == 1:
                await trio.sleep(1.0)
                time.sleep(self.block_s)  # noqa: ASYNC251 - the scenario: the loop blocked
                await trio.sleep(1.0)  # a delivery past its lease is cancelled here
            return reply(200)
        finally:
            if n == self.last:
                self.done.set()


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    requests: int
    keys: int
    outcomes: tuple[str | None, ...]  # per attempt
    state: str
    observer_reclaims: int
    reclaimed: tuple[int, ...]  # attempt numbers a reclaim took back (its retrying event)
    succeeded_events: tuple[int, ...]  # attempt numbers of schedule.run.succeeded
    violations: tuple[str, ...]

    def written_after_loss(self) -> int:
        """Attempts whose lease a reclaim took, yet whose own outcome was applied."""
        return sum(
            self.outcomes[attempt - 1] not in {"stale", "abandoned"} for attempt in self.reclaimed
        )


async def deliver_one(tmp_path: Path, *, block_s: float, observer: bool, last: int) -> Outcome:
    """Trigger one run, deliver it with the loop blocked once, and stop after request
    number ``last`` was answered and every delivery in flight has been recorded."""
    path = tmp_path / "steeple.db"
    clock = SystemClock()
    db = Database.open(path)  # threaded, as in production
    try:
        now = clock.now_ms()
        tenant = db.write_now(create_tenant, name="starved", now=now).tenant_id
        sid = db.write_now(
            insert_schedule,
            tenant_id=tenant,
            row=ScheduleRow(cron=YEARLY, next_fire_at=None),
            now=now,
        )
        db.write_now(trigger_schedule, tenant_id=tenant, schedule_id=sid, now=now)
        blocking = BlockingEndpoint(block_s=block_s, last=last)
        endpoint = Endpoint(respond=blocking.respond)
        with observing(path, observer) as watcher:
            async with running_engine(db, clock, endpoint, dispatch=CONFIG) as engine:  # type: ignore[arg-type]
                with trio.fail_after(30):
                    await blocking.done.wait()
                    await engine.dispatcher.drain()
        (run,) = db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=5)
        attempts = db.read_now(list_attempts, run_id=run.id)
        events = db.read_now(list_events, tenant_id=tenant, schedule_id=sid, limit=100)
    finally:
        db.close()
    return Outcome(
        requests=len(endpoint.requests),
        keys=len(set(endpoint.header("X-Idempotency-Key"))),
        outcomes=tuple(None if a.outcome is None else a.outcome.value for a in attempts),
        state=run.state.value,
        observer_reclaims=watcher.reclaimed,
        succeeded_events=tuple(
            int(str(e.data["attempt"])) for e in events if e.type.value == "schedule.run.succeeded"
        ),
        reclaimed=tuple(
            int(str(e.data["attempt"])) for e in events if e.data.get("reason") == "abandoned"
        ),
        violations=tuple(lease_violations(path)),
    )


async def test_event_loop_starvation(tmp_path: Path) -> None:
    short = await deliver_one(
        tmp_path / "short", block_s=1.5 * HEARTBEAT_MS / 1000, observer=True, last=1
    )
    # 1.5 x heartbeat: the lease outlived the block; nobody reclaimed; one attempt, ok.
    assert short.observer_reclaims == 0
    assert short.outcomes == ("ok",) and short.requests == 1
    assert short.succeeded_events == (1,) and short.violations == ()

    long = await deliver_one(tmp_path / "long", block_s=3 * LEASE_MS / 1000, observer=True, last=2)
    # 3 x lease: the observer took the lease during the block; the blocked attempt's
    # outcome was refused (stale); the run was redelivered with the same key.
    assert long.observer_reclaims >= 1
    assert long.outcomes[0] == "stale" and long.outcomes[-1] == "ok"
    assert long.succeeded_events == (len(long.outcomes),)  # only the redelivery succeeded
    assert long.keys == 1 and long.requests == len(long.outcomes)
    assert long.violations == () and long.reclaimed == (1,) and long.written_after_loss() == 0

    alone = await deliver_one(
        tmp_path / "alone", block_s=3 * LEASE_MS / 1000, observer=False, last=1
    )
    # 3 x lease, no other executor: when the loop resumes, the attempt's own deadline
    # (last renewal + lease − margin) has passed and the appliance's own reaper finds the
    # lease expired. Whichever writes first wins, fenced on the lease token: either the
    # cut-short attempt is recorded given up (abandoned; nobody had taken the lease) or the
    # reaper took it (abandoned) and the late completion is refused (stale). Never both.
    assert alone.outcomes[0] in {"abandoned", "stale"}
    assert alone.keys == 1 and alone.violations == () and alone.written_after_loss() == 0

    publish(
        "loop-starvation",
        lease_ms=LEASE_MS,
        heartbeat_ms=HEARTBEAT_MS,
        block_short_ms=int(1.5 * HEARTBEAT_MS),
        premature_reclaims=short.observer_reclaims,
        block_long_ms=3 * LEASE_MS,
        reclaims_during_block=long.observer_reclaims,
        blocked_attempt=long.outcomes[0],
        outcomes_after_lease_loss=sum(o.written_after_loss() for o in (short, long, alone)),
        redelivered_same_key=long.requests - 1,
        alone_blocked_attempt=alone.outcomes[0],
        lease_violations=len(long.violations) + len(alone.violations) + len(short.violations),
    )


# --- found by this scenario: a lease that lapses under a live delivery -------------------


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


async def test_a_lease_lapsed_under_a_live_delivery_is_given_up(
    autojump_clock: MockClock, tmp_path: Path
) -> None:
    """The loop's view of a lease (trio deadlines) and the database's (wall-clock
    ``lease_expires_at``) part ways when the wall clock steps forward past the lease while a
    delivery is in flight. The heartbeat's UPDATE then renews nothing, yet the dispatcher
    used to extend the delivery's deadline anyway: the reaper reclaimed the run, the
    dispatcher claimed it again while the first attempt was still sending (two concurrent
    deliveries of one run from one process), and the first attempt's end crashed the
    dispatcher (its in-flight table was keyed by run id). Now a delivery whose lease the
    heartbeat could not renew is cut short at once."""
    wall = TrioWallClock(T0)
    wall.now_ms()
    db = Database.open(tmp_path / "steeple.db", threaded=False)
    tenant = db.write_now(create_tenant, name="jumped", now=T0).tenant_id
    row = ScheduleRow(cron="0 3 * * *", timeout_seconds=120)  # T0 is 03:00: due at once
    sid = db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)
    in_flight: list[int] = []
    overlaps: list[tuple[int, ...]] = []

    async def respond(request: Received, n: int) -> Answer:
        in_flight.append(n)
        overlaps.extend([tuple(in_flight)] if len(in_flight) > 1 else [])
        try:
            if n == 1:
                await trio.sleep(90)  # slow: still sending when the lease lapses
            return reply(200)
        finally:
            in_flight.remove(n)

    try:
        async with running_engine(db, wall, Endpoint(respond=respond)):
            await trio.sleep(5)
            wall.jump(40_000)  # past the 30 s lease: the database now says it lapsed
            await trio.sleep(300)
        (run,) = db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=5)
        outcomes = [a.outcome.value for a in db.read_now(list_attempts, run_id=run.id) if a.outcome]
    finally:
        db.close()
    assert overlaps == []
    # cut short while its token still held: given up (abandoned), retried at once
    assert outcomes == ["abandoned", "ok"]
