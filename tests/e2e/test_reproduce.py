"""Resend, curl and the dedupe test against the real appliance over real HTTP, with a
real receiver verifying every request with the receiver helper."""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.receiver import verify_delivery
from tests.e2e.harness import Appliance, Delivery, Receiver, create_tenant

pytestmark = pytest.mark.slow

YEARLY = "0 0 1 1 *"  # never due during a test: runs come from triggers only


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def verified(d: Delivery, secret: str) -> None:
    verify_delivery(d.headers, d.body, secrets=[secret], now_s=int(time.time()))


def test_resend_curl_and_dedupe_test_over_real_http(tmp_path: Path, receiver: Receiver) -> None:
    alpha = create_tenant(tmp_path, "alpha")
    beta = create_tenant(tmp_path, "beta")
    app = Appliance(tmp_path).start()
    try:
        with app.client(alpha["api_key"]) as api, app.client(beta["api_key"]) as other:
            schedule = api.post(
                "/v1/schedules",
                json={"name": "r", "cron": YEARLY, "target_url": receiver.url, "payload": {"n": 1}},
            )
            assert schedule.status_code == 201, schedule.text
            sid = schedule.json()["id"]
            original = api.post(f"/v1/schedules/{sid}/trigger").json()
            receiver.wait_for(lambda ds: len(ds) >= 1)

            # Resend under a new key: another tenant sees nothing, a read key may not.
            resend = f"/v1/runs/{original['id']}/resend"
            assert other.post(resend, json={"key": "new"}).status_code == 404
            reader = api.post("/v1/keys", json={"name": "r", "scope": "read"}).json()
            with app.client(reader["api_key"]) as read_only:
                assert read_only.post(resend, json={"key": "new"}).status_code == 403
            made = api.post(resend, json={"key": "new"})
            assert made.status_code == 201, made.text
            copy = made.json()
            receiver.wait_for(lambda ds: len(ds) >= 2)
            first, second = receiver.snapshot()[:2]
            assert first.run_id == original["id"] and "x-steeple-resend" not in first.headers
            assert second.headers["x-steeple-resend"] == original["id"]
            assert (second.run_id, second.key) == (copy["id"], copy["idempotency_key"])
            assert second.key != first.key and second.body == first.body
            verified(second, alpha["signing_secret"])

            # curl: as sent reproduces the signature; signed now runs and verifies.
            curl = f"/v1/runs/{original['id']}/curl"
            assert other.get(curl).status_code == 404
            as_sent = api.get(curl, params={"signed": "as_sent"}).json()
            assert f"X-Signature: {first.headers['x-signature']}" in as_sent["argv"]
            if shutil.which("curl") is not None:
                now = api.get(curl).json()
                done = subprocess.run(
                    shlex.split(now["command"]), capture_output=True, text=True, timeout=30
                )
                assert done.returncode == 0, done.stderr
                receiver.wait_for(lambda ds: len(ds) >= 3)
                third = receiver.snapshot()[2]
                assert third.key == first.key
                verified(third, alpha["signing_secret"])

            # The dedupe test: two requests, one key, marked, both verified.
            seen = len(receiver.snapshot())
            test = f"/v1/schedules/{sid}/dedupe-test"
            assert other.post(test).status_code == 404
            result = api.post(test)
            assert result.status_code == 200, result.text
            assert result.json()["verdict"] == "duplicate_accepted"
            probes = receiver.snapshot()[seen:]
            assert [d.attempt for d in probes] == [1, 2]
            assert {d.key for d in probes} == {result.json()["idempotency_key"]}
            assert all(d.headers["x-steeple-test"] == "dedupe" for d in probes)
            for d in probes:
                verified(d, alpha["signing_secret"])
            runs = api.get(f"/v1/schedules/{sid}/runs").json()["items"]
            assert {r["id"] for r in runs} == {original["id"], copy["id"]}
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
