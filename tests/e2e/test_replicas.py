"""docs/scale-out.md's walkthrough, as a test: two replicas on one PostgreSQL database.

A tenant is created with the CLI (``steeple tenant create --database``, which migrates the
empty database), two ``steeple serve --database`` replicas listen on two ports, and an
every-second schedule is created through one of them. The replica delivering a chosen
occurrence is killed with SIGKILL while that request is open at the endpoint. Then:

- the survivor goes on delivering within seconds (the planner and dispatcher poll the
  shared database every ``replica_poll_ms``);
- the occurrence the dead replica held is delivered again by the survivor once its lease
  lapsed (30 s), with the same idempotency key;
- every second between the first and the last planned occurrence has exactly one job_run
  row (0 lost, 0 duplicate rows), every copy carries its occurrence's key (0 different-key
  duplicates; same-key copies are allowed: at least once).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from appliance.core.instants import parse_instant
from tests.chaos.recorder import all_succeeded, classify, duplicate_rows, open_runs
from tests.chaos.test_sigkill_loop import wait_until
from tests.e2e.harness import (
    ANSWER,
    Action,
    Appliance,
    Delivery,
    Receiver,
    create_tenant,
)
from tests.e2e.replicas import (
    first_arrival,
    one_row_per_second,
    rows_per_second,
    sender_of,
    senders,
    start_all,
)

pytestmark = pytest.mark.slow

LEASE_S = 30  # DispatchConfig.lease_ms: the held occurrence is taken back after it lapses
FAILOVER_S = 10.0  # the survivor must deliver again within this (it polls every second)


@dataclass
class HoldOne:
    """Hold the first delivery after :meth:`arm` open (recorded, unanswered) until
    :meth:`release`, then drop it; answer every other one at once."""

    armed: threading.Event = field(default_factory=threading.Event)
    held: list[Delivery] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self) -> None:
        self.armed.set()

    def respond(self, delivery: Delivery) -> Action:
        with self.lock:
            if not self.armed.is_set() or self.held:
                return ANSWER
            self.held.append(delivery)
        self.arrived.set()
        self.released.wait(120)
        return Action(drop=True)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def hold() -> HoldOne:
    return HoldOne()


@pytest.fixture
def receiver(hold: HoldOne) -> Iterator[Receiver]:
    r = Receiver(respond=hold.respond)
    yield r
    hold.release()
    r.close()


def test_deliveries_continue_through_the_other_replica_when_one_is_killed(
    tmp_path: Path, pg_dsn: str, hold: HoldOne, receiver: Receiver
) -> None:
    tenant = create_tenant(tmp_path / "replica-a", database=pg_dsn)  # migrates the database
    replicas = [
        Appliance(tmp_path / name, "--database", pg_dsn) for name in ("replica-a", "replica-b")
    ]
    start_all(replicas)
    try:
        a, b = replicas
        assert a.base_url != b.base_url  # two ports
        with a.client(tenant["api_key"]) as api:
            body = {"name": "tick", "cron": "* * * * * *", "target_url": receiver.url}
            created = api.post("/v1/schedules", json={**body, "payload": {"n": 1}})
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]
        receiver.wait_for(lambda ds: len(ds) >= 3)

        # Kill the replica that is delivering the next occurrence, its request still open.
        hold.arm()
        assert hold.arrived.wait(30), "no delivery arrived to hold"
        (held,) = hold.held
        victim_pid = sender_of(pg_dsn, held)
        victim = next(r for r in replicas if r.pid == victim_pid)
        survivor = b if victim is a else a
        victim.kill(signal.SIGKILL)
        killed_at = time.monotonic()
        hold.release()

        def by_survivor(d: Delivery) -> bool:
            return sender_of(pg_dsn, d) == survivor.pid

        receiver.wait_for(
            lambda ds: sum(1 for d in ds if d.arrived > killed_at) >= 3, FAILOVER_S + 5
        )
        failover = first_arrival(receiver.snapshot(), after=killed_at, sent_by=by_survivor)
        assert failover is not None and failover - killed_at < FAILOVER_S

        # The held occurrence comes back from the survivor once its lease lapsed.
        receiver.wait_for(
            lambda ds: any(d.key == held.key and d.attempt > held.attempt for d in ds),
            LEASE_S + 30,
        )
        until_ms = max(parse_instant(d.scheduled_for) for d in receiver.snapshot())
        counts = rows_per_second(pg_dsn, schedule_id)
        expected = [(schedule_id, at) for at in counts if at <= until_ms]
        wait_until(lambda: all_succeeded(pg_dsn, expected), "the window's runs to succeed", 60)
        with survivor.client(tenant["api_key"]) as api:
            api.post(f"/v1/schedules/{schedule_id}/pause").raise_for_status()
        wait_until(lambda: open_runs(pg_dsn) == 0, "no open run")
    finally:
        codes = [r.kill(signal.SIGTERM) for r in replicas if r.proc and r.proc.poll() is None]
    assert codes == [0], "".join(survivor.log)

    lost, doubled = one_row_per_second(rows_per_second(pg_dsn, schedule_id), until_ms=until_ms)
    assert lost == [] and doubled == []
    assert duplicate_rows(pg_dsn) == 0
    deliveries = receiver.snapshot()
    figures = classify(deliveries, expected, until_ms=until_ms)
    assert figures.lost == 0, figures.lost_list
    assert figures.dup_diff_key == 0, figures.bad_keys
    assert figures.dup_same_key >= 1  # the held occurrence, delivered again
    redelivered = [d for d in deliveries if d.key == held.key and d.attempt > held.attempt]
    assert {senders(pg_dsn)[(d.run_id, d.attempt)] for d in redelivered} == {survivor.pid}
    assert len(expected) >= 3 + 3  # before the kill, after it
