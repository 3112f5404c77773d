"""``/v1/notifications``: a tenant sets, reads and removes its failure-notification URL;
it is validated as a schedule's target is, written only with a write key, and private."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

HOOK = "https://hooks.example.com/steeple-failures"


async def test_set_read_replace_and_delete(api: Api) -> None:
    assert (await api.call("GET", "/v1/notifications")).status == 404
    put = await api.call("PUT", "/v1/notifications", json_body={"url": HOOK})
    assert (put.status, put.body) == (200, {"url": HOOK})
    assert (await api.call("GET", "/v1/notifications")).body == {"url": HOOK}
    replaced = await api.call("PUT", "/v1/notifications", json_body={"url": HOOK + "/v2"})
    assert replaced.status == 200
    assert (await api.call("GET", "/v1/notifications")).body == {"url": HOOK + "/v2"}
    assert (await api.call("DELETE", "/v1/notifications")).status == 204
    assert (await api.call("GET", "/v1/notifications")).status == 404
    again = await api.call("DELETE", "/v1/notifications")
    assert again.status == 404 and "no notification URL" in again.body["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "url"),
        ({"url": 7}, "url"),
        ({"url": ""}, "url"),
        ({"url": "ftp://hooks.example.com/x"}, "url"),
        ({"url": "https://hooks.example.com/" + "x" * 2048}, "url"),
        ({"url": HOOK, "secret": "no"}, "secret"),
        (["not", "an", "object"], "body"),
    ],
)
async def test_an_invalid_body_is_422_naming_the_field(api: Api, body: object, field: str) -> None:
    reply = await api.call("PUT", "/v1/notifications", json_body=body)
    assert reply.status == 422, reply.body
    assert reply.fields == [field]
    assert (await api.call("GET", "/v1/notifications")).status == 404


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",  # a loopback literal: refused before any lookup
        "https://intranet.example.com/hook",  # resolves to 10.1.2.3: refused by the policy
        "https://nowhere.example.com/hook",  # does not resolve
    ],
)
async def test_a_blocked_or_unresolvable_destination_is_422(api: Api, url: str) -> None:
    reply = await api.call("PUT", "/v1/notifications", json_body={"url": url})
    assert reply.status == 422 and reply.fields == ["url"], reply.body
    assert (await api.call("GET", "/v1/notifications")).status == 404


async def test_a_read_key_reads_but_cannot_set_or_delete(api: Api) -> None:
    issued = await api.call("POST", "/v1/keys", json_body={"name": "ro", "scope": "read"})
    reader = Api(app=api.app, key=issued.body["api_key"])
    await api.call("PUT", "/v1/notifications", json_body={"url": HOOK})
    assert (await reader.call("GET", "/v1/notifications")).body == {"url": HOOK}
    put = await reader.call("PUT", "/v1/notifications", json_body={"url": HOOK + "/x"})
    assert put.status == 403
    assert (await reader.call("DELETE", "/v1/notifications")).status == 403
    assert (await api.call("GET", "/v1/notifications")).body == {"url": HOOK}


async def test_another_tenant_neither_sees_nor_removes_it(api: Api, other: Api) -> None:
    await api.call("PUT", "/v1/notifications", json_body={"url": HOOK})
    assert (await other.call("GET", "/v1/notifications")).status == 404
    assert (await other.call("DELETE", "/v1/notifications")).status == 404
    assert (await api.call("GET", "/v1/notifications")).body == {"url": HOOK}


async def test_without_a_key_it_is_401(anonymous: Api) -> None:
    assert (await anonymous.call("GET", "/v1/notifications")).status == 401
    assert (await anonymous.call("PUT", "/v1/notifications", json_body={"url": HOOK})).status == 401
