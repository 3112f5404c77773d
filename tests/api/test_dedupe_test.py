"""``POST /v1/schedules/{id}/dedupe-test`` through the real delivery client against a real
loopback receiver: two requests, one key, marked as a test, each answer recorded, and
nothing of the schedule changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from quart_trio import QuartTrio

from appliance.core.addresses import AddressPolicy, IPAddress
from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.core.ids import idempotency_key, run_id
from appliance.engine.delivery import DeliveryClient, probe_answer, send
from appliance.receiver import verify_delivery
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.api.conftest import (
    START,
    Api,
    FakeClock,
    Nudges,
    build_app,
)
from tests.engine.loopback import Respond, keep_alive_server, response

LOOPBACK = AddressPolicy.parse(["127.0.0.0/8"])
PATH = "/v1/schedules/{}/dedupe-test"


@pytest.fixture
def policy() -> AddressPolicy:
    return LOOPBACK


@pytest.fixture
async def app(
    db: Database, clock: FakeClock, nudges: Nudges, policy: AddressPolicy, dns: dict[str, IPAddress]
) -> AsyncIterator[QuartTrio]:
    """The test app with the dedupe test wired to the real delivery client (its idle
    connections closed after the test)."""
    async with DeliveryClient(policy) as client:

        async def send_probe(request: DeliveryRequest) -> ProbeAnswer:
            return probe_answer(await send(client, request))

        yield build_app(
            db=db, clock=clock, nudges=nudges, policy=policy, dns=dns, send_probe=send_probe
        )


@pytest.fixture
def tenant(app: QuartTrio, db: Database) -> tuple[Api, str]:
    made = db.write_now(create_tenant, name="gamma", now=START)
    return Api(app=app, key=made.api_key, tenant_id=made.tenant_id), made.signing_secret


def answers(*replies: tuple[int, bytes], delay_s: float = 0) -> Respond:
    async def respond(n: int) -> tuple[bytes, bool]:
        await trio.sleep(delay_s)
        status, body = replies[n - 1]
        return response(body, status=f"{status} X"), True

    return respond


def headers_of(raw: bytes) -> dict[str, str]:
    head = raw.partition(b"\r\n\r\n")[0].decode("ascii").split("\r\n")[1:]
    return {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in head)}


async def everything(api: Api, schedule_id: str) -> list[Any]:
    """What the test must not change."""
    return [
        (await api.call("GET", f"/v1/schedules/{schedule_id}")).body,
        (await api.call("GET", f"/v1/schedules/{schedule_id}/runs")).body,
        (await api.call("GET", "/v1/runs")).body,
    ]


async def test_one_key_twice_marked_as_a_test_and_both_answers_recorded(
    tenant: tuple[Api, str],
) -> None:
    api, secret = tenant
    async with keep_alive_server(answers((200, b"done"), (200, b"seen it"))) as server:
        schedule = await api.create(target_url=server.url(), headers={"X-Team": "billing"})
        before = await everything(api, schedule["id"])
        reply = await api.call("POST", PATH.format(schedule["id"]))
    assert reply.status == 200, reply.body
    result = reply.body
    text = result["scheduled_for"]
    assert text.startswith("9999-")
    assert result["idempotency_key"] == idempotency_key(schedule["id"], text)
    assert result["run_id"] == run_id(schedule["id"], text)
    assert [(a["attempt"], a["status"], a["excerpt"], a["error"]) for a in result["answers"]] == [
        (1, 200, "done", None),
        (2, 200, "seen it", None),
    ]
    assert (result["test"], result["verdict"]) == ("dedupe", "duplicate_accepted")
    assert len(server.raw) == 2
    for attempt, (raw, body) in enumerate(zip(server.raw, server.bodies, strict=True), 1):
        headers = headers_of(raw)
        assert headers["x-steeple-test"] == "dedupe"
        assert headers["x-team"] == "billing"
        assert headers["x-attempt"] == str(attempt)
        verified = verify_delivery(headers, body, secrets=[secret], now_s=START // 1000)
        assert (verified.idempotency_key, verified.run_id) == (
            result["idempotency_key"],
            result["run_id"],
        )
        assert body == b'{"report":"nightly","n":1}'
    assert await everything(api, schedule["id"]) == before
    (event,) = [
        e for e in (await api.call("GET", "/v1/events")).body["items"]
        if e["type"] == "schedule.dedupe_tested"
    ]  # fmt: skip
    assert (event["schedule_id"], event["run_id"]) == (schedule["id"], None)
    assert event["actor"]["kind"] == "api_key"
    assert event["data"] == {
        "test": "dedupe",
        "idempotency_key": result["idempotency_key"],
        "scheduled_for": text,
        "verdict": "duplicate_accepted",
        "first_status": 200,
        "first_excerpt": "done",
        "first_error": None,
        "second_status": 200,
        "second_excerpt": "seen it",
        "second_error": None,
    }


async def test_a_refused_duplicate_is_reported(tenant: tuple[Api, str]) -> None:
    api, _ = tenant
    async with keep_alive_server(answers((201, b"ok"), (409, b"duplicate"))) as server:
        schedule = await api.create(target_url=server.url())
        reply = await api.call("POST", PATH.format(schedule["id"]), json_body={})
    assert [a["status"] for a in reply.body["answers"]] == [201, 409]
    assert reply.body["verdict"] == "duplicate_refused"


async def test_each_request_is_cut_at_the_schedules_timeout(tenant: tuple[Api, str]) -> None:
    api, _ = tenant
    slow = answers((200, b"late"), (200, b"late"), delay_s=5)
    async with keep_alive_server(slow) as server:
        schedule = await api.create(target_url=server.url(), timeout_seconds=1)
        with trio.fail_after(4):  # two requests of at most 1 s each
            reply = await api.call("POST", PATH.format(schedule["id"]))
    assert reply.status == 200
    assert [a["error"] for a in reply.body["answers"]] == [
        "no response within the 1 s deadline"
    ] * 2
    assert [a["status"] for a in reply.body["answers"]] == [None, None]
    assert reply.body["verdict"] == "first_failed"


async def test_a_refused_destination_is_422_and_nothing_is_sent_or_recorded(
    tenant: tuple[Api, str], dns: dict[str, IPAddress]
) -> None:
    api, _ = tenant
    schedule = await api.create(target_url="https://hooks.example.com/steeple")
    dns["hooks.example.com"] = dns["intranet.example.com"]  # now resolves to 10.1.2.3
    before = (await api.call("GET", "/v1/events")).body
    reply = await api.call("POST", PATH.format(schedule["id"]))
    assert (reply.status, reply.fields) == (422, ["target_url"])
    assert (await api.call("GET", "/v1/events")).body == before


async def test_other_tenants_read_keys_and_bodies(
    tenant: tuple[Api, str], other: Api, db: Database
) -> None:
    api, _ = tenant
    schedule = await api.create(target_url="http://127.0.0.1:9/never")
    before = (await api.call("GET", "/v1/events")).body
    assert (await other.call("POST", PATH.format(schedule["id"]))).status == 404
    reader = (await api.call("POST", "/v1/keys", json_body={"name": "r", "scope": "read"})).body
    read_only = Api(app=api.app, key=reader["api_key"])
    assert (await read_only.call("POST", PATH.format(schedule["id"]))).status == 403
    bad = await api.call("POST", PATH.format(schedule["id"]), json_body={"times": 3})
    assert (bad.status, bad.fields) == (422, ["$"])
    after = (await api.call("GET", "/v1/events")).body["items"]
    assert [e["type"] for e in after[len(before["items"]) :]] == ["api_key.created"]  # the key's


async def test_an_app_without_a_sender_answers_503(
    db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    bare = build_app(db=db, clock=clock, nudges=nudges, policy=LOOPBACK)
    made = db.write_now(create_tenant, name="delta", now=START)
    api = Api(app=bare, key=made.api_key, tenant_id=made.tenant_id)
    schedule = await api.create(target_url="http://127.0.0.1:9/never")
    assert (await api.call("POST", PATH.format(schedule["id"]))).status == 503
