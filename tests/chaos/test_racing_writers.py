"""Scenario 9 — racing writers (ADR 0034 run materialisation exactly-once; ADR 0033 claims).

Three executor processes (four in the soak profile) run the real planner, dispatcher and
reaper on one database file with the lock file bypassed — the multi-replica model. They
start together on schedules that fire every second (one with jitter) and on schedules whose
cursors lie minutes in the past (catch-up ``all``, ``latest`` and ``skip``), so the first
planning passes race over hundreds of occurrences at once. While they run, a random racer
is frozen past its lease now and then, so the others reap and re-claim its runs.

Invariants: 0 duplicate rows; every occurrence of the window has exactly one row, and it is
``missed`` exactly when the catch-up policy says so; nothing delivered lost, nothing missed
delivered, every copy carries its occurrence's key; 0 overlapping leases; every racer
claimed; no racer crashed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant as store_create_tenant
from tests.chaos.conftest import Profile
from tests.chaos.executor import Executor
from tests.chaos.recorder import (
    catchup_violations,
    classify,
    duplicate_rows,
    expected_occurrences,
    lease_violations,
    out_of_order_rows,
    outcome_counts,
    publish,
    query,
    run_states,
)
from tests.chaos.test_sigkill_loop import wait_until
from tests.e2e.harness import Action, Receiver
from tests.store.conftest import ScheduleRow, insert_schedule

pytestmark = pytest.mark.slow

LEASE = ("--lease-ms", "2000", "--heartbeat-ms", "400", "--margin-ms", "400")
MINUTE = 60_000
WINDOW_MS = 3_600_000
# (cron, jitter, policy, cursor offset from now)
SCHEDULES = (
    ("* * * * * *", 0, "all", 0),
    ("* * * * * *", 1, "all", 0),
    ("*/5 * * * * *", 0, "all", -5 * MINUTE),
    ("* * * * * *", 0, "skip", -3 * MINUTE),
    ("*/2 * * * * *", 0, "latest", -2 * MINUTE),
)


@pytest.fixture
def receiver(profile: Profile) -> Iterator[Receiver]:
    """Answers after 0-300 ms, so a frozen racer usually has deliveries in flight."""
    rng = profile.rng()
    r = Receiver(respond=lambda _d: Action(delay_s=rng.uniform(0, 0.3)))
    yield r
    r.close()


def make_schedules(db_path: Path, url: str, now: int) -> dict[str, tuple[str, int, str, int]]:
    db = Database.open(db_path)
    try:
        tenant = db.write_now(store_create_tenant, name="racers", now=now).tenant_id
        made: dict[str, tuple[str, int, str, int]] = {}
        for cron, jitter, policy, offset in SCHEDULES:
            row = ScheduleRow(
                cron=cron,
                target_url=url,
                jitter_seconds=jitter,
                catchup_policy=policy,
                catchup_window_seconds=WINDOW_MS // 1000,
                next_fire_at=now + offset,
            )
            sid = db.write_now(insert_schedule, tenant_id=tenant, row=row, now=now)
            made[sid] = (cron, jitter, policy, now + offset)
        return made
    finally:
        db.close()


def test_racing_executors_materialise_once_and_never_share_a_lease(
    tmp_path: Path, profile: Profile, receiver: Receiver
) -> None:
    rng = profile.rng()
    db_path = tmp_path / "steeple.db"
    now = time.time_ns() // 1_000_000 // 1000 * 1000 + 1000
    schedules = make_schedules(db_path, receiver.url, now)
    spawned = [Executor(db_path, *LEASE, wait=False) for _ in range(profile.pick(3, 4))]
    racers = [racer.ready() for racer in spawned]
    freezes = 0
    try:
        stop_at = time.monotonic() + (profile.minutes * 60 if profile.soak else 6)
        while time.monotonic() < stop_at:
            # The injected timing: let them race a while, then freeze one past its lease.
            threading.Event().wait(rng.uniform(0.5, 1.5))
            victim = rng.choice(racers)
            victim.freeze()
            threading.Event().wait(2.5)  # > the 2 s lease: the others reap its runs
            victim.thaw()
            freezes += 1
        until_ms = time.time_ns() // 1_000_000
        try:
            # A racer thawed before the others reaped it cuts its own delivery short: a
            # deadline failure, retried after at least 60 s. Hence the long ceiling.
            wait_until(lambda: _open_until(db_path, until_ms) == 0, "the window", timeout=150)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {_open_detail(db_path, until_ms)}") from None
    finally:
        logs = [racer.stop() for racer in racers]

    states = run_states(db_path)
    window = {
        sid: expected_occurrences(
            sid, cron, after_ms=cursor - 1, until_ms=until_ms, jitter_seconds=jitter
        )
        for sid, (cron, jitter, _, cursor) in schedules.items()
    }
    to_deliver = [
        o for occurrences in window.values() for o in occurrences if states.get(o) != "missed"
    ]
    figures = classify(receiver.snapshot(), to_deliver, until_ms=until_ms)
    missed = sum(1 for o in states.values() if o == "missed")
    claims = _claims_by_incarnation(db_path)
    publish(
        "racing_writers",
        seed=profile.seed,
        racers=len(racers),
        freezes=freezes,
        rows=sum(1 for (_, at) in states if at <= until_ms),
        missed=missed,
        **figures.as_dict(),
        dup_rows=duplicate_rows(db_path),
        stale=outcome_counts(db_path).get("stale", 0),
        abandoned=outcome_counts(db_path).get("abandoned", 0),
        claims="/".join(str(claims.get(r.incarnation_id, 0)) for r in racers),
    )
    assert duplicate_rows(db_path) == 0
    for sid, occurrences in window.items():
        rows = sorted(at for (s, at) in states if s == sid and at <= until_ms)
        assert rows == [at for _, at in occurrences], f"{sid}: rows differ from occurrences"
        cron, jitter, policy, _ = schedules[sid]
        problems = catchup_violations(
            db_path,
            schedule_id=sid,
            cron=cron,
            policy=policy,
            window_ms=WINDOW_MS,
            jitter_seconds=jitter,
        )
        assert problems == [], problems[:5]
    assert figures.lost == 0, figures.lost_list[:5]
    assert figures.unexpected == 0, figures.unexpected_list[:5]  # nothing missed was sent
    assert figures.dup_diff_key == 0
    assert lease_violations(db_path) == []
    assert out_of_order_rows(db_path) == []
    assert all(claims.get(r.incarnation_id, 0) > 0 for r in racers), claims
    assert missed > 0 and all("Traceback" not in log for log in logs)


def _open_until(db_path: Path, until_ms: int) -> int:
    ((n,),) = query(
        db_path,
        "SELECT COUNT(*) FROM job_runs WHERE scheduled_for <= ?"
        " AND state IN ('pending', 'running', 'retry_wait')",
        (until_ms,),
    )
    return int(str(n))


def _claims_by_incarnation(db_path: Path) -> dict[str, int]:
    rows = query(db_path, "SELECT incarnation_id, COUNT(*) FROM attempts GROUP BY 1")
    return {str(inc): int(str(n)) for inc, n in rows}


def _open_detail(db_path: Path, until_ms: int) -> list[tuple[object, ...]]:
    return query(
        db_path,
        "SELECT r.id, r.state, r.due_at - ?, a.attempt, a.incarnation_id, a.outcome, a.error"
        " FROM job_runs r JOIN attempts a ON a.run_id = r.id WHERE r.scheduled_for <= ?"
        " AND r.state IN ('pending', 'running', 'retry_wait') ORDER BY r.id, a.attempt",
        (until_ms, until_ms),
    )
