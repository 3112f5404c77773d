"""Failure notifications end to end: a real appliance, a schedule aimed at a receiver that
answers 410 Gone, and the tenant's notification receiver gets the ``schedule.run.failed``
event as a signed delivery (verified with the reference Standard Webhooks library)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

from tests.e2e.harness import Action, Appliance, Receiver, create_tenant

pytestmark = pytest.mark.slow


def test_a_permanently_failing_schedule_notifies_the_tenant(tmp_path: Path) -> None:
    tenant = create_tenant(tmp_path)
    gone = Receiver(respond=lambda delivery: Action(status=410))
    notified = Receiver()
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            put = api.put("/v1/notifications", json={"url": notified.url})
            assert put.status_code == 200, put.text
            body = {"name": "doomed", "cron": "* * * * * *", "target_url": gone.url, "payload": {}}
            created = api.post("/v1/schedules", json=body)
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]

            def failed(deliveries: list) -> bool:  # type: ignore[type-arg]
                return any(d.headers["x-event-type"] == "schedule.run.failed" for d in deliveries)

            notified.wait_for(failed)
            (delivery,) = [
                d for d in notified.snapshot() if d.headers["x-event-type"] == "schedule.run.failed"
            ]
            Webhook(tenant["signing_secret"]).verify(delivery.body, delivery.headers)
            envelope = json.loads(delivery.body)
            assert envelope["type"] == "schedule.run.failed"
            assert envelope["schedule_id"] == schedule_id
            assert envelope["data"]["reason"] == "gone"
            feed = api.get("/v1/events", params={"type": "schedule.run.failed"}).json()
            assert feed["items"][0] == envelope  # the same envelope as the event feed's
    finally:
        app.kill()
        gone.close()
        notified.close()
