"""``method`` through the API (docs/schedules.md, "HTTP methods"): a GET or DELETE is
created without a payload and shown without one; a payload with it is a 422 naming both
fields, changing nothing; a patch switches the kind; and the run's curl copy, run by the
real ``curl``, reaches a real receiver with the method and body Steeple sends."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from appliance.core.addresses import AddressPolicy
from appliance.receiver import verify_delivery
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.api.conftest import START, Api, schedule_json
from tests.e2e.harness import Receiver

BODY_FIELDS = {"payload", "body", "payload_template"}


@pytest.fixture
def policy() -> AddressPolicy:
    """The receiver listens on loopback."""
    return AddressPolicy.parse(["127.0.0.0/8"])


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_bodiless_schedule_is_created_and_shown_without_a_body(
    api: Api, method: str
) -> None:
    created = await api.create(method=method, payload=...)
    assert created["method"] == method and created["content_type"] is None
    assert not BODY_FIELDS & set(created)
    read = await api.call("GET", f"/v1/schedules/{created['id']}")
    assert {k: v for k, v in read.body.items() if k != "next_runs"} == {
        k: v for k, v in created.items() if k not in ("warnings", "next_runs")
    }


async def test_post_is_the_default_and_shown(api: Api) -> None:
    created = await api.create()
    assert created["method"] == "POST" and created["payload"] == {"report": "nightly", "n": 1}


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("field", ["payload", "body", "payload_template", "content_type"])
async def test_a_body_with_a_bodiless_method_is_a_422_naming_both(
    api: Api, method: str, field: str
) -> None:
    value: Any = {"payload": {"a": 1}, "body": "x", "payload_template": {"a": 1}}.get(
        field, "text/plain"
    )
    document = schedule_json(method=method, payload=...) | {field: value}
    refused = await api.call("POST", "/v1/schedules", json_body=document)
    assert refused.status == 422
    assert [e["field"] for e in refused.body["errors"]] == [field, "method"]
    assert (await api.call("GET", "/v1/schedules")).body["items"] == []


async def test_a_body_method_without_a_body_is_still_refused(api: Api) -> None:
    for method in ("POST", "PUT", "PATCH"):
        refused = await api.call(
            "POST", "/v1/schedules", json_body=schedule_json(method=method, payload=...)
        )
        assert refused.status == 422 and refused.body["errors"][0]["field"] == "payload"


async def test_an_unknown_method_is_a_422(api: Api) -> None:
    refused = await api.call("POST", "/v1/schedules", json_body=schedule_json(method="HEAD"))
    assert refused.status == 422 and [e["field"] for e in refused.body["errors"]] == ["method"]


async def test_a_patch_switches_between_a_body_and_none(api: Api) -> None:
    created = await api.create(body="a,b", payload=..., content_type="text/csv")
    path = f"/v1/schedules/{created['id']}"
    kept = await api.call("PATCH", path, json_body={"method": "GET"})
    assert kept.status == 422
    assert [e["field"] for e in kept.body["errors"]] == ["body", "method"]
    unchanged = await api.call("GET", path)
    assert unchanged.body["version"] == created["version"] and unchanged.body["method"] == "POST"
    to_get = await api.call("PATCH", path, json_body={"method": "GET", "body": None})
    assert to_get.status == 200, to_get.body
    assert (to_get.body["method"], to_get.body["content_type"]) == ("GET", None)
    assert not BODY_FIELDS & set(to_get.body)
    to_put = await api.call("PATCH", path, json_body={"method": "PUT", "payload": {"n": 2}})
    assert to_put.status == 200, to_put.body
    assert (to_put.body["method"], to_put.body["payload"]) == ("PUT", {"n": 2})
    assert to_put.body["content_type"] == "application/json"
    events = await api.call("GET", "/v1/events")
    changed = [
        e["data"]["changed"] for e in events.body["items"] if e["type"] == "schedule.updated"
    ]
    assert changed == [["method", "content_type", "body"], ["method", "payload", "content_type"]]


async def test_a_batch_creates_bodiless_items(api: Api) -> None:
    items = [schedule_json(name=f"n{i}", method="GET", payload=...) for i in range(3)]
    created = await api.call("POST", "/v1/schedules/batch", json_body={"schedules": items})
    assert created.status == 201, created.body
    assert [(s["method"], s["content_type"]) for s in created.body["items"]] == [("GET", None)] * 3


@pytest.fixture
def secret_api(app: Any, db: Database) -> tuple[Api, str]:
    tenant = db.write_now(create_tenant, name="gamma", now=START)
    return Api(app=app, key=tenant.api_key, tenant_id=tenant.tenant_id), tenant.signing_secret


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs the curl program")
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_the_curl_copy_sends_the_method_and_only_a_body_method_has_a_body(
    secret_api: tuple[Api, str], receiver: Receiver, method: str
) -> None:
    api, secret = secret_api
    bodiless = method in ("GET", "DELETE")
    overrides: dict[str, Any] = {"payload": ...} if bodiless else {}
    schedule = await api.create(method=method, target_url=receiver.url, **overrides)
    run = (await api.call("POST", f"/v1/schedules/{schedule['id']}/trigger")).body
    reply = await api.call("GET", f"/v1/runs/{run['id']}/curl")
    assert reply.status == 200, reply.body
    argv = reply.body["argv"]
    assert argv[1:3] == ["--request", method]
    assert ("--data-raw" in argv) is not bodiless and ("Expect:" in argv) is not bodiless
    done = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            shlex.split(reply.body["command"]), capture_output=True, text=True, timeout=30
        )
    )
    assert done.returncode == 0, done.stderr
    (got,) = receiver.snapshot()
    assert got.method == method
    verified = verify_delivery(got.headers, got.body, secrets=[secret], now_s=START // 1000)
    assert verified.run_id == run["id"]
    if bodiless:
        assert got.body == b""
        assert "content-type" not in got.headers and "content-length" not in got.headers
    else:
        assert got.body == b'{"report":"nightly","n":1}'
