"""What the API shows of a connect-time refusal: ``POST …/dedupe-test`` sends through the
real delivery client, whose resolver says (unlike the write-time check's, a moment
before) that the host is loopback — DNS rebinding. The answers carry the write-time
check's generic words and no address; the operator's log has the detail. On both stores
(``STEEPLE_TEST_DATABASE=postgresql``)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator

import pytest
from quart_trio import QuartTrio

from appliance.core.addresses import AddressPolicy, IPAddress
from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.engine.delivery import DeliveryClient, probe_answer, send
from appliance.engine.delivery.connect import refusal
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.api.conftest import START, Api, FakeClock, Nudges, build_app
from tests.engine.loopback import fake_dns

ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b|::1\b|loopback")


@pytest.fixture
async def app(
    db: Database, clock: FakeClock, nudges: Nudges, dns: dict[str, IPAddress]
) -> AsyncIterator[QuartTrio]:
    policy = AddressPolicy()  # loopback refused
    rebound = fake_dns({"hooks.example.com": ["127.0.0.1"]})
    async with DeliveryClient(policy, resolve=rebound) as client:

        async def send_probe(request: DeliveryRequest) -> ProbeAnswer:
            return probe_answer(await send(client, request))

        yield build_app(
            db=db, clock=clock, nudges=nudges, policy=policy, dns=dns, send_probe=send_probe
        )


async def test_a_connect_time_refusal_names_no_address_to_the_tenant(
    app: QuartTrio, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    made = db.write_now(create_tenant, name="gamma", now=START)
    api = Api(app=app, key=made.api_key, tenant_id=made.tenant_id)
    schedule = await api.create(target_url="https://hooks.example.com/steeple")
    with caplog.at_level(logging.WARNING):
        reply = await api.call("POST", f"/v1/schedules/{schedule['id']}/dedupe-test")
    assert reply.status == 200, reply.body
    assert [a["error"] for a in reply.body["answers"]] == [refusal("hooks.example.com")] * 2
    assert ADDRESS.search(json.dumps(reply.body)) is None, reply.body
    refused = [r.getMessage() for r in caplog.records if "refused by the address" in r.message]
    assert refused and all("resolves to 127.0.0.1, which is a loopback" in r for r in refused)
