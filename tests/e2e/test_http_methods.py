"""Each HTTP method end to end (docs/schedules.md, "HTTP methods"): a real appliance
delivers one schedule of each method to a real loopback receiver; every request carries
the contract's headers, and the reference Standard Webhooks library verifies each — a
GET's and a DELETE's over their empty body, sent without Content-Type or
Content-Length."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

from tests.e2e.harness import Appliance, Receiver, create_tenant

pytestmark = pytest.mark.slow

PAYLOAD = {"task": "billing-rollup"}


def test_every_method_arrives_as_itself_and_verifies(tmp_path: Path) -> None:
    tenant = create_tenant(tmp_path)
    receiver = Receiver()
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            ids = {}
            for method in ("POST", "PUT", "PATCH", "GET", "DELETE"):
                body = {"name": method, "cron": "0 3 1 1 *", "target_url": receiver.url}
                body |= {"method": method}
                if method in ("POST", "PUT", "PATCH"):
                    body |= {"payload": PAYLOAD}
                created = api.post("/v1/schedules", json=body)
                assert created.status_code == 201, created.text
                assert created.json()["method"] == method
                ids[created.json()["id"]] = method
                assert api.post(f"/v1/schedules/{created.json()['id']}/trigger").status_code == 201
            receiver.wait_for(lambda ds: len(ds) >= 5)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        receiver.close()
    deliveries = receiver.snapshot()
    assert sorted(d.method for d in deliveries) == sorted(ids.values())
    webhook = Webhook(tenant["signing_secret"])
    for delivery in deliveries:
        assert delivery.method == ids[delivery.schedule_id]
        assert {"x-idempotency-key", "x-signature", "webhook-signature", "x-attempt"} <= set(
            delivery.headers
        )
        if delivery.method in ("GET", "DELETE"):
            assert delivery.body == b""
            assert "content-type" not in delivery.headers
            assert "content-length" not in delivery.headers
            # The empty body is what is signed: verified as is (there is no JSON to parse).
            assert webhook.verify(delivery.body, delivery.headers, json_parse=False) is None
        else:
            assert delivery.headers["content-type"] == "application/json"
            assert delivery.body == json.dumps(PAYLOAD, separators=(",", ":")).encode()
            assert webhook.verify(delivery.body, delivery.headers) == PAYLOAD
