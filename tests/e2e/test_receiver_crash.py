"""The receiver helper across real crashes, against the real appliance.

1. The receiver (tests/e2e/receiver_process.py: docs/receiver.md's transactional pattern, the
effect a row committed with the key) runs as a subprocess and SIGKILLs itself inside its
handling — before the effect, after it but before the commit, after the commit but before
answering — in an order drawn from a seeded generator. A fresh receiver process takes over
the same listening socket each time; Steeple redelivers. In the end every occurrence
Steeple counts as succeeded has exactly one effect, every crash's occurrence included, and
no other occurrence has any.

2. The appliance dies while the receiver's first handling of a delivery is still running
(a slow downstream); the restarted appliance redelivers at once. That repeat is answered
409 — the one-phase helper answered 2xx, so the run succeeded, and when the first
handling then failed nothing ever retried. Here the first handling fails, and Steeple's
next retry takes effect.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.receiver import Receiver, SqliteDeduper, VerifiedDelivery
from tests.e2e.harness import Appliance, create_tenant, iter_pages
from tests.e2e.receiver_process import POINTS
from tests.receiver.guide import guide_block

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
WAIT_S = 120
OPEN_STATES = {"pending", "running", "retry_wait"}


class ReceiverProcesses:
    """Receiver subprocesses one after another on one listening socket held here, so
    connections queue while a killed receiver is replaced: one process per planned crash
    point (each kills itself), then one that lives until :meth:`close`."""

    def __init__(self, tmp_path: Path, secret: str, plan: list[str]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.db = tmp_path / "receiver.db"
        self.crash_log = tmp_path / "crashes.log"
        self.secret = secret
        self.plan = plan
        self.exit_codes: list[int] = []
        self.all_crashed = threading.Event()
        self._lock = threading.Lock()
        self._closing = False
        self._current: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _spawn(self, point: str | None) -> subprocess.Popen[bytes] | None:
        fd = self.listener.fileno()
        args = ["--fd", str(fd), "--db", str(self.db), "--secret", self.secret]
        args += ["--crash-log", str(self.crash_log)]
        args += ["--crash-at", point] if point else []
        with self._lock:
            if self._closing:
                return None
            self._current = subprocess.Popen(
                [sys.executable, "-m", "tests.e2e.receiver_process", *args],
                pass_fds=(fd,),
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            return self._current

    def _run(self) -> None:
        for point in self.plan:
            process = self._spawn(point)
            if process is None:
                return
            self.exit_codes.append(process.wait())
        if self._spawn(None) is not None:
            self.all_crashed.set()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            current = self._current
        if current is not None and current.poll() is None:
            current.kill()
            current.wait(30)
        self._thread.join(30)
        self.listener.close()

    def crashes(self) -> list[tuple[str, str]]:
        lines = self.crash_log.read_text(encoding="utf-8").splitlines()
        return [(point, key) for point, key in (line.split() for line in lines)]

    def effects(self) -> Counter[str]:
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute("SELECT key FROM effects").fetchall()
        conn.close()
        return Counter(key for (key,) in rows)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll a condition another process makes true (Steeple's runs) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        threading.Event().wait(0.2)


@pytest.fixture
def seed() -> int:
    return int(os.environ.get("STEEPLE_TEST_SEED", random.randrange(2**32)))


@pytest.fixture
def tenant(tmp_path: Path) -> dict[str, str]:
    return create_tenant(tmp_path / "steeple")


@pytest.fixture
def receivers(tmp_path: Path, tenant: dict[str, str], seed: int) -> Iterator[ReceiverProcesses]:
    plan = list(POINTS) * 2  # every point twice, in an order drawn from the seed
    random.Random(seed).shuffle(plan)
    processes = ReceiverProcesses(tmp_path, tenant["signing_secret"], plan)
    yield processes
    processes.close()


def test_every_occurrence_takes_effect_exactly_once_across_receiver_crashes(
    tmp_path: Path, tenant: dict[str, str], receivers: ReceiverProcesses, seed: int
) -> None:
    context = f"seed {seed} (STEEPLE_TEST_SEED), plan {receivers.plan}"
    app = Appliance(tmp_path / "steeple").start()
    try:
        with app.client(tenant["api_key"]) as api:
            every_second = {
                "name": "tick",
                "cron": "* * * * * *",
                "target_url": receivers.url,
                "body": "tick: not JSON",  # the helper verifies any body
                "content_type": "text/plain",
            }
            created = api.post("/v1/schedules", json=every_second)
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]
            assert receivers.all_crashed.wait(WAIT_S), context

            def runs() -> dict[str, dict[str, Any]]:
                pages = iter_pages(api, f"/v1/schedules/{schedule_id}/runs")
                return {run["idempotency_key"]: run for run in pages}

            def victims_succeeded() -> bool:
                current = runs()
                return all(current[key]["state"] == "succeeded" for _, key in receivers.crashes())

            # Pausing withdraws runs waiting for a retry, so let the crashed ones finish first.
            wait_until(victims_succeeded, f"every crashed delivery to succeed; {context}")
            api.post(f"/v1/schedules/{schedule_id}/pause").raise_for_status()
            wait_until(lambda: not {r["state"] for r in runs().values()} & OPEN_STATES, "runs")
            final = runs()
            attempts = {key: api.get(f"/v1/runs/{run['id']}").json() for key, run in final.items()}
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    receivers.close()

    assert receivers.exit_codes == [-signal.SIGKILL] * len(receivers.plan), context
    crashes = receivers.crashes()
    assert [point for point, _ in crashes] == receivers.plan, context
    states = Counter(run["state"] for run in final.values())
    assert set(states) <= {"succeeded", "cancelled"}, (states, context)
    succeeded = {key for key, run in final.items() if run["state"] == "succeeded"}
    # Exactly once: one effect per succeeded occurrence, none for any other.
    assert receivers.effects() == Counter(dict.fromkeys(succeeded, 1)), context
    for point, key in crashes:  # each crash was redelivered, and then took effect
        outcomes = [a["outcome"] for a in attempts[key]["attempts"]]
        assert key in succeeded and len(outcomes) >= 2 and outcomes[-1] == "ok", (
            point,
            outcomes,
            context,
        )


def test_a_repeat_during_a_slow_handling_is_refused_and_the_next_retry_acts(
    tmp_path: Path, tenant: dict[str, str]
) -> None:
    """The guide's two-phase receiver (docs/receiver.md) serves the real appliance."""
    example = guide_block("run_job")
    entered, finish = threading.Event(), threading.Event()
    victims: list[VerifiedDelivery] = []
    effects: list[VerifiedDelivery] = []

    def handle(delivery: VerifiedDelivery) -> None:
        if victims:  # later occurrences, and the victim's retry once its handling failed
            effects.append(delivery)
            return
        victims.append(delivery)  # the first delivery: a slow downstream, then a failure
        entered.set()
        assert finish.wait(WAIT_S)
        raise RuntimeError("downstream failed")

    with SqliteDeduper(tmp_path / "keys.db") as deduper:
        receiver = Receiver(secrets=(tenant["signing_secret"],), deduper=deduper)
        server = example["SteepleServer"](("127.0.0.1", 0), receiver, handle)
        server.handle_error = lambda request, address: None  # answers to a killed appliance
        serving = threading.Thread(target=server.serve_forever, daemon=True)
        serving.start()
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        try:
            _slow_handling_across_an_appliance_restart(
                tmp_path, tenant, url, entered, finish, victims, effects
            )
        finally:
            finish.set()
            server.shutdown()
            serving.join(30)
            server.server_close()


def _slow_handling_across_an_appliance_restart(
    tmp_path: Path,
    tenant: dict[str, str],
    url: str,
    entered: threading.Event,
    finish: threading.Event,
    victims: list[VerifiedDelivery],
    effects: list[VerifiedDelivery],
) -> None:
    data_dir = tmp_path / "steeple"
    first = Appliance(data_dir).start()
    try:
        with first.client(tenant["api_key"]) as api:
            tick = {"name": "tick", "cron": "* * * * * *", "target_url": url, "payload": {}}
            schedule_id = api.post("/v1/schedules", json=tick).json()["id"]
            assert entered.wait(WAIT_S)
    finally:
        first.kill(signal.SIGKILL)
    victim = victims[0]
    second = Appliance(data_dir).start()
    try:
        with second.client(tenant["api_key"]) as api:

            def victim_run() -> dict[str, Any]:
                run: dict[str, Any] = api.get(f"/v1/runs/{victim.run_id}").json()
                return run

            def answered() -> bool:
                return any(a["http_status"] is not None for a in victim_run()["attempts"])

            wait_until(answered, "the redelivery during the slow handling")
            run = victim_run()
            assert [a["http_status"] for a in run["attempts"]][-1] == 409, run
            assert run["state"] == "retry_wait", run
            finish.set()  # the first handling now fails; its hold is released
            wait_until(lambda: victim_run()["state"] == "succeeded", "the next retry")
            attempts = victim_run()["attempts"]
            api.post(f"/v1/schedules/{schedule_id}/pause").raise_for_status()
    finally:
        assert second.kill(signal.SIGTERM) == 0, "".join(second.log)
    statuses = [(a["outcome"], a["http_status"]) for a in attempts]
    assert statuses[0][0] == "abandoned" and statuses[-1] == ("ok", 200), statuses
    assert ("retryable", 409) in statuses, statuses
    assert [d.attempt > 1 for d in effects if d.idempotency_key == victim.idempotency_key] == [True]
