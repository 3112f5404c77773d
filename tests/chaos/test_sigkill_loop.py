"""Scenario 1 — SIGKILL loop under steady load (ADR 0034, every layer at once).

The real appliance runs three schedules firing every second (one with jitter, one every
two seconds) against the recording endpoint, and is killed with SIGKILL again and again,
restarting each time. Each kill point is drawn from a seeded generator:

- ``in_flight`` — a request is open at the endpoint (the effect recorded, no answer yet);
- ``after_answer`` — the endpoint has just written its 200: the appliance is between the
  answer and the commit of the outcome (mid-commit, approximated by timing);
- ``random`` — after a random number of deliveries plus a random sub-second delay.

After the last kill the appliance runs undisturbed until every occurrence of the observed
window has been delivered and recorded, then the schedules are paused and the appliance
stops once no run is open. Invariants: 0 lost, 0 duplicate rows, every duplicate
delivery carries its occurrence's key, nothing unexpected, no overlapping lease, rows
materialised in order. Figures: kills, occurrences, rows, copies, restart→first
redelivery.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.chaos.conftest import Profile
from tests.chaos.recorder import (
    all_succeeded,
    classify,
    duplicate_rows,
    expected_occurrences,
    lease_violations,
    open_runs,
    out_of_order_rows,
    outcome_counts,
    publish,
    query,
    run_states,
)
from tests.e2e.harness import ANSWER, Action, Appliance, Delivery, Receiver, create_tenant

pytestmark = pytest.mark.slow

SCHEDULES = (
    ("tick-a", "* * * * * *", 0),
    ("tick-b", "* * * * * *", 1),  # jitter: due up to 999 ms after scheduled_for
    ("tick-c", "*/2 * * * * *", 0),
)
KILL_POINTS = ("in_flight", "after_answer", "random")
WAIT_S = 60.0  # generous ceiling for every condition wait


@dataclass
class KillPlan:
    """Decides, per delivery, whether this is where the appliance dies. Shared between the
    endpoint's handler threads and the test's thread."""

    point: str = ""
    pid: int = 0
    skip: int = 0  # deliveries to let through first
    fired: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self, point: str, pid: int, skip: int = 0) -> None:
        with self.lock:
            self.point, self.pid, self.skip = point, pid, skip
            self.fired, self.release = threading.Event(), threading.Event()

    def respond(self, delivery: Delivery) -> Action:
        with self.lock:
            point, fired, release, pid = self.point, self.fired, self.release, self.pid
            if point not in ("in_flight", "after_answer") or fired.is_set():
                return ANSWER
            if self.skip > 0:
                self.skip -= 1
                return ANSWER
            fired.set()
        if point == "in_flight":
            release.wait(WAIT_S)  # hold the request open until the appliance is dead
            return Action(drop=True)
        return Action(after=lambda: os.kill(pid, signal.SIGKILL))


@pytest.fixture
def plan() -> KillPlan:
    return KillPlan()


@pytest.fixture
def receiver(plan: KillPlan) -> Iterator[Receiver]:
    r = Receiver(respond=plan.respond)
    yield r
    plan.release.set()
    r.close()


def create_schedules(app: Appliance, api_key: str, url: str) -> dict[str, tuple[str, int]]:
    made: dict[str, tuple[str, int]] = {}
    with app.client(api_key) as api:
        for name, cron, jitter in SCHEDULES:
            body = {
                "name": name,
                "cron": cron,
                "target_url": url,
                "payload": {"n": name},
                "jitter_seconds": jitter,
            }
            created = api.post("/v1/schedules", json=body)
            assert created.status_code == 201, created.text
            made[created.json()["id"]] = (cron, jitter)
    return made


def kill_at(
    point: str, app: Appliance, plan: KillPlan, receiver: Receiver, rng: random.Random
) -> None:
    """Kill ``app`` at ``point``; returns once it is dead."""
    if point == "random":
        seen = len(receiver.snapshot())
        receiver.wait_for(lambda ds: len(ds) >= seen + rng.randint(1, 4), WAIT_S)
        threading.Event().wait(rng.uniform(0, 0.8))  # the injected timing, not a wait
        app.kill(signal.SIGKILL)
        return
    assert plan.fired.wait(WAIT_S), "no delivery reached the kill point"
    app.kill(signal.SIGKILL)  # after_answer: already sent from the handler thread
    plan.release.set()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll a database condition (another process writes it) until true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        threading.Event().wait(0.05)


def test_sigkill_loop_loses_nothing_and_duplicates_only_with_the_same_key(
    tmp_path: Path, profile: Profile, plan: KillPlan, receiver: Receiver
) -> None:
    rng = profile.rng()
    tenant = create_tenant(tmp_path)
    db_path = tmp_path / "steeple.db"
    kills = 0
    restarts: list[float] = []
    deadline = time.monotonic() + profile.minutes * 60
    app = Appliance(tmp_path).start()
    schedules = create_schedules(app, tenant["api_key"], receiver.url)
    receiver.wait_for(lambda ds: len(ds) >= 3, WAIT_S)
    while kills < profile.pick(5, 10_000) and (not profile.soak or time.monotonic() < deadline):
        point = KILL_POINTS[kills % len(KILL_POINTS)] if kills < 3 else rng.choice(KILL_POINTS)
        # Which delivery dies: the first after boot is always the run the last kill left
        # behind, so always killing the first would aim every kill at one run.
        plan.arm(point, app.pid, skip=rng.randint(0, 3))
        kill_at(point, app, plan, receiver, rng)
        kills += 1
        restarts.append(time.monotonic())
        app = Appliance(tmp_path).start()
    plan.arm("", app.pid)

    # The quiet period: the window closes a moment from now; wait until all of it is done.
    until_ms = time.time_ns() // 1_000_000 + 2_000
    created = {
        str(sid): int(str(at)) for sid, at in query(db_path, "SELECT id, created_at FROM schedules")
    }
    expected = [
        occurrence
        for sid, (cron, jitter) in schedules.items()
        for occurrence in expected_occurrences(
            sid, cron, after_ms=created[sid], until_ms=until_ms, jitter_seconds=jitter
        )
    ]
    wait_until(
        lambda: all_succeeded(db_path, expected),
        "every occurrence of the window to succeed",
    )
    with app.client(tenant["api_key"]) as api:
        for sid in schedules:
            api.post(f"/v1/schedules/{sid}/pause").raise_for_status()
    wait_until(lambda: open_runs(db_path) == 0, "no open run")
    assert app.kill(signal.SIGTERM) == 0, "".join(app.log)

    deliveries = receiver.snapshot()
    figures = classify(deliveries, expected, until_ms=until_ms)
    rows = len([o for o in run_states(db_path) if o[1] <= until_ms])
    redelivery_ms = first_redelivery_ms(deliveries, restarts)
    publish(
        "sigkill_loop",
        seed=profile.seed,
        kills=kills,
        **figures.as_dict(),
        rows=rows,
        dup_rows=duplicate_rows(db_path),
        abandoned=outcome_counts(db_path).get("abandoned", 0),
        redelivery_ms_p50=round(statistics.median(redelivery_ms)) if redelivery_ms else "-",
        redelivery_ms_max=round(max(redelivery_ms)) if redelivery_ms else "-",
    )
    assert figures.lost == 0, figures.lost_list
    assert figures.dup_diff_key == 0, figures.bad_keys
    assert figures.unexpected == 0, figures.unexpected_list
    assert figures.effects == figures.occurrences == rows
    assert duplicate_rows(db_path) == 0
    assert lease_violations(db_path) == []
    assert out_of_order_rows(db_path) == []
    assert figures.dup_same_key >= 1  # the in-flight kill guarantees at least one redelivery


def first_redelivery_ms(deliveries: list[Delivery], restarts: list[float]) -> list[float]:
    """For each restart after which something was redelivered (attempt > 1): the time
    from spawning the process to the first such copy's arrival."""
    found: list[float] = []
    for i, started in enumerate(restarts):
        ends = restarts[i + 1] if i + 1 < len(restarts) else float("inf")
        later = [d.arrived for d in deliveries if started <= d.arrived < ends and d.attempt > 1]
        if later:
            found.append((min(later) - started) * 1000)
    return found
