"""/metrics parsed by prometheus_client's own parser, /readyz through a drain, the
systemd notify protocol against a fake socket, ``steeple healthcheck``, JSON logs with no
secret in them."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import Appliance, Receiver, create_tenant, steeple

pytestmark = pytest.mark.slow

FORBIDDEN_LABELS = {"tenant", "tenant_id", "schedule", "schedule_id", "run", "run_id", "key"}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.release()
    r.close()


def every_second(receiver: Receiver) -> dict[str, object]:
    return {"name": "t", "cron": "* * * * * *", "target_url": receiver.url, "payload": 1}


def scrape(app: Appliance) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    reply = httpx.get(app.base_url + "/metrics", timeout=10, trust_env=False)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            assert not FORBIDDEN_LABELS & set(sample.labels), sample
            labels = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def test_metrics_count_deliveries_and_readyz_turns_503_while_draining(
    tmp_path: Path, receiver: Receiver
) -> None:
    tenant = create_tenant(tmp_path)
    app = Appliance(tmp_path, env={"STEEPLE_SHUTDOWN_GRACE_SECONDS": "60"}).start()
    try:
        first = scrape(app)  # nothing delivered yet: every counter is 0
        ((labels, one),) = first["steeple_build_info"].items()
        assert one == 1 and dict(labels)["version"] and dict(labels)["sqlite"].startswith("3.")
        assert first["steeple_deliveries_total"][(("outcome", "succeeded"),)] == 0
        with app.client(tenant["api_key"]) as api:
            assert api.post("/v1/schedules", json=every_second(receiver)).status_code == 201
        receiver.wait_for(lambda ds: len(ds) >= 3)
        deadline = time.monotonic() + 30
        while (now := scrape(app))["steeple_deliveries_total"][(("outcome", "succeeded"),)] < 2:
            assert time.monotonic() < deadline, now
            time.sleep(0.2)  # the outcome commits just after the receiver answered
        assert now["steeple_dispatch_lateness_seconds_count"][()] >= 2
        assert now["steeple_dispatch_lateness_seconds_bucket"][(("le", "+Inf"),)] >= 2
        assert now["steeple_active_schedules"][()] == 1
        assert set(now["steeple_runs_open"]) == {
            (("state", s),) for s in ("waiting", "due", "running")
        }
        assert now["steeple_db_bytes"][()] > 0 and "process_cpu_seconds_total" in now
        assert now["steeple_runs_missed_total"][(("reason", "catchup_skip"),)] == 0
        # The figures /admin/health and `steeple status` share (store.figures): the boot's
        # database check of this tiny file passed long before two deliveries went out.
        assert now["steeple_db_check_last_success_timestamp_seconds"][()] > 0
        assert now["steeple_start_timestamp_seconds"][()] > 0
        assert now["steeple_recent_delivered_per_minute"][()] >= 0.4  # ≥ 2 in five minutes
        assert now["steeple_recent_dispatch_lateness_p99_seconds"][()] >= 0

        ready = httpx.get(app.base_url + "/readyz", timeout=10, trust_env=False)
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        receiver.hold = lambda _d: True  # the next delivery keeps the drain going
        count = len(receiver.snapshot())
        receiver.wait_for(lambda ds: len(ds) > count)
        app.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        deadline = time.monotonic() + 20
        while (
            ready := httpx.get(app.base_url + "/readyz", timeout=10, trust_env=False)
        ).status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert ready.status_code == 503 and "draining" in ready.json()["detail"]
        assert httpx.get(app.base_url + "/healthz", trust_env=False).status_code == 200
    finally:
        receiver.release()
        app.kill(signal.SIGTERM)


def test_the_first_scrape_counts_deliveries_made_before_it(
    tmp_path: Path, receiver: Receiver
) -> None:
    """Counters start with the process, not with the first scrape: deliveries the engine
    finished before anyone scraped are in the first answer (and in none twice)."""
    tenant = create_tenant(tmp_path)
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            assert api.post("/v1/schedules", json=every_second(receiver)).status_code == 201
            deadline = time.monotonic() + 30
            while len(succeeded := api.get("/v1/runs?state=succeeded").json()["items"]) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.2)  # no scrape meanwhile: the API's view of the runs only
        first = scrape(app)
        assert first["steeple_deliveries_total"][(("outcome", "succeeded"),)] >= len(succeeded)
        assert first["steeple_dispatch_lateness_seconds_count"][()] >= len(succeeded)
        again = scrape(app)
        assert (
            again["steeple_deliveries_total"][(("outcome", "succeeded"),)]
            >= first["steeple_deliveries_total"][(("outcome", "succeeded"),)]
        )
    finally:
        app.kill(signal.SIGTERM)


def test_steeple_healthcheck_exits_0_when_ready_and_1_when_not(tmp_path: Path) -> None:
    app = Appliance(tmp_path).start()
    try:
        listen = app.base_url.removeprefix("http://")
        done = steeple("healthcheck", "--listen", listen)
        assert done.returncode == 0 and done.stdout.startswith("steeple: ready:"), done
    finally:
        assert app.kill(signal.SIGTERM) == 0
    done = steeple("healthcheck", "--listen", listen)
    assert done.returncode == 1 and "NOT READY" in done.stdout


def test_systemd_notify_protocol_against_a_fake_socket(tmp_path: Path) -> None:
    path = tmp_path / "n.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(path))
        listener.settimeout(30)
        env = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "600000"}  # ping every 0.2 s
        app = Appliance(tmp_path / "data", env=env).start()
        try:
            got = []
            while not any(m.startswith("WATCHDOG=1") for m in got):
                got.append(listener.recv(4096).decode())
            app.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            while not any(m.startswith("STOPPING=1") for m in got):
                got.append(listener.recv(4096).decode())
            assert app.proc.wait(30) == 0, "".join(app.log)  # type: ignore[union-attr]
        finally:
            app.kill()
    ready = next(i for i, m in enumerate(got) if m.startswith("READY=1"))
    assert got[0].startswith("STATUS=")  # booting, before ready
    assert "STATUS=serving on http://127.0.0.1:" in got[ready]
    assert ready < next(i for i, m in enumerate(got) if m == "WATCHDOG=1")
    assert "STATUS=draining" in got[-1]


def test_json_logs_carry_no_api_key_or_signing_secret(tmp_path: Path, receiver: Receiver) -> None:
    tenant = create_tenant(tmp_path)
    app = Appliance(tmp_path, env={"STEEPLE_LOG_FORMAT": "json"}).start()
    try:
        with app.client(tenant["api_key"]) as api:
            made = api.post("/v1/schedules", json=every_second(receiver))
            assert made.status_code == 201
            assert api.post("/v1/signing-secrets/rotate", json={}).status_code == 201
            wrong = api.get(
                "/v1/schedules", headers={"Authorization": f"Bearer {tenant['api_key']}x"}
            )
            assert wrong.status_code == 401
        receiver.wait_for(lambda ds: len(ds) >= 2)
    finally:
        assert app.kill(signal.SIGTERM) == 0
    lines = [json.loads(line) for line in app.log]
    assert all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
    assert any("listening on" in line["msg"] for line in lines)
    text = "".join(app.log)
    assert tenant["api_key"] not in text and tenant["signing_secret"] not in text
    assert tenant["api_key"][4:] not in text and "whsec_" not in text
