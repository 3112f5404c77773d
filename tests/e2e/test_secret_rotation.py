"""A signing-secret rotation under a live every-second schedule: the receiver switches
secrets when it likes and never fails a verification. Every request is checked with the
reference Standard Webhooks library, once per secret."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.e2e.harness import Action, Appliance, Delivery, Receiver, create_tenant

pytestmark = pytest.mark.slow


def verifies(secret: str, delivery: Delivery) -> bool:
    try:
        Webhook(secret).verify(delivery.body, delivery.headers)
    except WebhookVerificationError:
        return False
    return True


def test_rotation_with_overlap_loses_no_verification(tmp_path: Path) -> None:
    tenant = create_tenant(tmp_path)
    old = tenant["signing_secret"]
    deployed = {"secret": old}  # what the receiver verifies with right now
    failures: list[Delivery] = []

    def respond(delivery: Delivery) -> Action:
        if verifies(deployed["secret"], delivery):
            return Action(status=200)
        failures.append(delivery)
        return Action(status=401)

    receiver = Receiver(respond=respond)
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            body = {"name": "tick", "cron": "* * * * * *", "target_url": receiver.url}
            reply = api.post("/v1/schedules", json=body | {"payload": {"n": 1}})
            assert reply.status_code == 201, reply.text
            receiver.wait_for(lambda ds: len(ds) >= 2)
            before = len(receiver.snapshot())

            rotated = api.post("/v1/signing-secrets/rotate", json={"overlap_seconds": 300})
            assert rotated.status_code == 201, rotated.text
            new = rotated.json()["secret"]
            listed = api.get("/v1/signing-secrets").json()["items"]
            assert listed[0]["id"] == rotated.json()["id"] and len(listed) == 2
            assert all(new not in str(s) and old not in str(s) for s in listed)
            receiver.wait_for(lambda ds: len(ds) >= before + 3)
            during = len(receiver.snapshot())

            deployed["secret"] = new  # the receiver deploys the new secret
            receiver.wait_for(lambda ds: len(ds) >= during + 2)
            (old_entry,) = [s for s in listed if s["id"] != rotated.json()["id"]]
            expired = api.delete(f"/v1/signing-secrets/{old_entry['id']}")
            assert expired.status_code == 200, expired.text
            after_expiry = len(receiver.snapshot())
            receiver.wait_for(lambda ds: len(ds) >= after_expiry + 3)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        receiver.close()
    deliveries = receiver.snapshot()
    assert failures == []
    # Every request signed while both secrets were active verifies with each on its own.
    overlap = deliveries[before + 1 : during]
    assert overlap and all(verifies(old, d) and verifies(new, d) for d in overlap)
    assert all(len(d.headers["webhook-signature"].split()) == 2 for d in overlap)
    # After the expiry (allowing one request signed as it happened), only the new one.
    settled = deliveries[after_expiry + 1 :]
    assert settled and all(verifies(new, d) and not verifies(old, d) for d in settled)
