"""Scenario 5 — hung endpoints and zombie executors (ADR 0033 leases and fencing).

**Hung endpoint.** The endpoint never answers. The attempt's deadline (``timeout_seconds``)
cancels it: the attempt is recorded ``retryable`` with a deadline error, the run waits at
least 60 s (the slow-down for timeouts), and the retry carries the same key.

**Zombie.** Executor Z (a real process running the real dispatcher, short leases) has a
delivery in flight when it is frozen with SIGSTOP, past its lease. A second executor C,
a separate process on the same file (no lock file: this is the multi-replica model), reaps
the lapsed lease and delivers the run itself. Then Z is thawed with SIGCONT. Z's late
completion must be refused (attempt ``stale``), Z must send nothing more for runs it lost,
no two leases of one run may overlap, and no finished run may be reopened.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.instants import parse_instant
from appliance.engine.delivery import Answer
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant as store_create_tenant
from tests.chaos.conftest import Profile
from tests.chaos.executor import Executor
from tests.chaos.recorder import (
    all_succeeded,
    attempts,
    classify,
    delivery_from_request,
    duplicate_rows,
    expected_occurrences,
    lease_violations,
    outcome_counts,
    publish,
    query,
)
from tests.chaos.test_sigkill_loop import wait_until
from tests.e2e.harness import ANSWER, HOLD, Action, Appliance, Delivery, Receiver, create_tenant
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0, ScheduleRow, insert_schedule

pytestmark = pytest.mark.slow

TIMEOUT_S = 2
LEASE = ("--lease-ms", "2000", "--heartbeat-ms", "400", "--margin-ms", "400")


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


async def test_a_hung_endpoint_is_cut_at_the_deadline_and_retried_with_the_same_key(
    autojump_clock: MockClock, inline_db: Database, profile: Profile
) -> None:
    tenant = inline_db.write_now(store_create_tenant, name="acme", now=T0).tenant_id
    row = ScheduleRow(cron="* * * * *", timeout_seconds=TIMEOUT_S, next_fire_at=T0)
    sid = inline_db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)
    hangs = profile.pick(3, 6)  # within the default 8 attempts
    copies: list[Delivery] = []

    async def respond(request: Received, n: int) -> Answer:
        copy = delivery_from_request(request, arrived=trio.current_time())
        copies.append(copy)
        if parse_instant(copy.scheduled_for) == T0 and len(copies_of(T0)) <= hangs:
            await trio.sleep_forever()  # hung: only the deadline ends it
        return reply(200, b"ok")

    def copies_of(instant: int) -> list[Delivery]:
        return [c for c in copies if parse_instant(c.scheduled_for) == instant]

    wall = TrioWallClock(T0)
    async with running_engine(inline_db, wall, Endpoint(respond=respond)):
        for _ in range(48 * 360):  # 48 virtual hours: retries wait 60 s, 5 min, 30 min, ...
            if inline_db.read_now(lambda c: c.execute(_STATE, (T0,)).fetchone()[0]) == "succeeded":
                break
            await trio.sleep(10)

    chain = copies_of(T0)
    rows = inline_db.read_now(lambda c: list(c.execute(_ATTEMPTS, (T0,))))
    gaps = [(b.arrived - a.arrived) for a, b in itertools.pairwise(chain)]
    publish(
        "hung_endpoint",
        seed=profile.seed,
        hangs=hangs,
        copies=len(chain),
        keys=len({c.key for c in chain}),
        deadline_attempts=sum(1 for r in rows if "deadline" in str(r[2])),
        min_retry_gap_s=round(min(gaps)),
    )
    assert len(chain) == hangs + 1 and len({c.key for c in chain}) == 1
    assert [r[1] for r in rows] == ["retryable"] * hangs + ["ok"]
    assert all(f"within the {TIMEOUT_S} s deadline" in str(r[2]) for r in rows[:hangs])
    assert all(r[3] >= TIMEOUT_S * 1000 for r in rows[:hangs])  # latency: cut at the deadline
    assert min(gaps) >= 60  # a timed-out receiver gets at least a minute
    assert sid


_STATE = "SELECT state FROM job_runs WHERE scheduled_for = ?"
_ATTEMPTS = (
    "SELECT a.attempt, a.outcome, a.error, a.latency_ms FROM attempts a"
    " JOIN job_runs r ON r.id = a.run_id WHERE r.scheduled_for = ? ORDER BY a.attempt"
)


def test_the_real_appliance_records_a_hung_attempt_as_a_deadline_failure(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.respond = lambda d: HOLD if d.attempt == 1 else ANSWER
    tenant = create_tenant(tmp_path)
    db_path = tmp_path / "steeple.db"
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            body = {
                "name": "hung",
                "cron": "* * * * * *",
                "target_url": receiver.url,
                "payload": {},
                "timeout_seconds": TIMEOUT_S,
            }
            sid = api.post("/v1/schedules", json=body).json()["id"]
            receiver.wait_for(lambda ds: len(ds) >= 1)
            run_id = receiver.snapshot()[0].run_id
            wait_until(lambda: _attempt_outcome(db_path, run_id) is not None, "the deadline")
            api.post(f"/v1/schedules/{sid}/pause").raise_for_status()
            run = api.get(f"/v1/runs/{run_id}").json()
    finally:
        receiver.release()
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    ((outcome, error, latency, started, finished),) = query(
        db_path,
        "SELECT outcome, error, latency_ms, started_at, finished_at FROM attempts WHERE run_id = ?",
        (run_id,),
    )
    publish("hung_endpoint_real_process", outcome=outcome, latency_ms=latency, state=run["state"])
    assert outcome == "retryable" and f"within the {TIMEOUT_S} s deadline" in str(error)
    # Cut at the deadline, counted from the claim (a few ms before the attempt started).
    assert TIMEOUT_S * 1000 - 200 <= int(str(latency)) < TIMEOUT_S * 1000 + 1500
    # Waiting for its retry (≥ 60 s) when pausing cancelled it; nothing was lost unseen.
    assert run["state"] == "cancelled" and run["attempts"][0]["outcome"] == "retryable"
    assert int(str(finished)) >= int(str(started))


def _attempt_outcome(db_path: Path, run_id: str) -> str | None:
    rows = query(db_path, "SELECT outcome FROM attempts WHERE run_id = ?", (run_id,))
    return None if not rows or rows[0][0] is None else str(rows[0][0])


# --- the zombie ------------------------------------------------------------------------


def make_schedule(db_path: Path, url: str, *, cron: str, timeout_seconds: int = 20) -> str:
    db = Database.open(db_path)
    try:
        start = time.time_ns() // 1_000_000 // 1000 * 1000 + 1000  # the next whole second
        tenant = db.write_now(store_create_tenant, name="zombies", now=start).tenant_id
        row = ScheduleRow(
            cron=cron, target_url=url, timeout_seconds=timeout_seconds, next_fire_at=start
        )
        return db.write_now(insert_schedule, tenant_id=tenant, row=row, now=start)
    finally:
        db.close()


def test_a_thawed_zombie_is_fenced_off(
    tmp_path: Path, profile: Profile, receiver: Receiver
) -> None:
    held: list[Delivery] = []

    def respond(delivery: Delivery) -> Action:
        if not held:
            held.append(delivery)
            return HOLD  # Z's delivery stays in flight while Z is frozen
        return ANSWER

    receiver.respond = respond
    db_path = tmp_path / "steeple.db"
    sid = make_schedule(db_path, receiver.url, cron="* * * * * *")
    zombie = Executor(db_path, *LEASE)
    claimer: Executor | None = None
    try:
        receiver.wait_for(lambda ds: len(ds) >= 1)
        zombie.freeze()
        victim = held[0]
        claimer = Executor(db_path, *LEASE)
        # C reaps Z's lapsed lease and delivers the victim itself.
        receiver.wait_for(lambda ds: any(d.run_id == victim.run_id and d.attempt > 1 for d in ds))
        wait_until(lambda: _state(db_path, victim.run_id) == "succeeded", "C to finish the run")
        frozen_copies = len(receiver.snapshot())
        zombie.thaw()
        wait_until(
            lambda: _attempt_outcome(db_path, victim.run_id) == "stale", "Z's stale completion"
        )
        until_ms = max(parse_instant(d.scheduled_for) for d in receiver.snapshot())
        expected = expected_occurrences(
            sid, "* * * * * *", after_ms=parse_instant(victim.scheduled_for) - 1, until_ms=until_ms
        )
        wait_until(lambda: all_succeeded(db_path, expected), "the window to succeed")
    finally:
        receiver.release()
        logs = zombie.stop() + (claimer.stop() if claimer else "")
    deliveries = receiver.snapshot()
    figures = classify(deliveries, expected, until_ms=until_ms)
    victim_attempts = attempts(db_path)[victim.run_id]
    outcomes = outcome_counts(db_path)
    publish(
        "zombie",
        seed=profile.seed,
        **figures.as_dict(),
        stale=outcomes.get("stale", 0),
        abandoned_then_stale=sum(1 for a in victim_attempts if a.outcome == "stale"),
        copies_while_frozen=frozen_copies,
        dup_rows=duplicate_rows(db_path),
        lease_violations=len(lease_violations(db_path)),
    )
    assert [a.outcome for a in victim_attempts] == ["stale", "ok"], victim_attempts
    assert victim_attempts[0].incarnation_id == zombie.incarnation_id
    assert claimer is not None and victim_attempts[1].incarnation_id == claimer.incarnation_id
    assert _state(db_path, victim.run_id) == "succeeded"  # the stale completion changed nothing
    assert "recorded stale" in logs
    assert lease_violations(db_path) == []
    assert figures.lost == 0 and figures.dup_diff_key == 0 and figures.unexpected == 0
    assert duplicate_rows(db_path) == 0
    # Z sent nothing for a run after another executor had taken it over.
    assert zombie_copies_after_takeover(deliveries) == []


def zombie_copies_after_takeover(deliveries: list[Delivery]) -> list[Delivery]:
    """Copies that arrived after a later attempt of the same run had already arrived."""
    newest: dict[str, int] = {}
    late: list[Delivery] = []
    for d in sorted(deliveries, key=lambda d: d.arrived):
        if d.attempt < newest.get(d.run_id, 0):
            late.append(d)
        newest[d.run_id] = max(d.attempt, newest.get(d.run_id, 0))
    return late


def _state(db_path: Path, run_id: str) -> str | None:
    rows = query(db_path, "SELECT state FROM job_runs WHERE id = ?", (run_id,))
    return str(rows[0][0]) if rows else None
