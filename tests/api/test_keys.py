"""``/v1/keys``: a tenant issues, lists and revokes its keys; scopes are enforced on every
route; revocation takes effect at the next request; the last write key stays."""

from __future__ import annotations

import pytest

from appliance.store.api_keys import LAST_USED_RESOLUTION_MS
from tests.api.conftest import Api, FakeClock, schedule_json


async def issue(api: Api, scope: str, name: str = "ci") -> dict[str, str]:
    reply = await api.call("POST", "/v1/keys", json_body={"name": name, "scope": scope})
    assert reply.status == 201, reply.body
    return reply.body  # type: ignore[no-any-return]


async def test_an_issued_key_is_shown_once_and_listed_without_the_key(api: Api) -> None:
    issued = await issue(api, "read", name="grafana")
    assert issued["api_key"].startswith("stk_") and len(issued["api_key"]) == 36
    assert issued["prefix"] == issued["api_key"][:8]
    listed = (await api.call("GET", "/v1/keys")).body["items"]
    assert [k["name"] for k in listed] == ["initial key", "grafana"]
    mine = next(k for k in listed if k["id"] == issued["id"])
    assert "api_key" not in mine and issued["api_key"] not in str(listed)
    assert (mine["scope"], mine["prefix"]) == ("read", issued["prefix"])


async def test_a_read_key_reads_and_previews_but_every_write_is_403_and_changes_nothing(
    api: Api,
) -> None:
    schedule = await api.create()
    reader = Api(app=api.app, key=(await issue(api, "read"))["api_key"])
    assert (await reader.call("GET", "/v1/schedules")).status == 200
    assert (await reader.call("GET", f"/v1/schedules/{schedule['id']}")).status == 200
    assert (await reader.call("GET", "/v1/events")).status == 200
    preview = await reader.call("POST", "/v1/cron/preview", json_body={"cron": "0 3 * * *"})
    assert preview.status == 200
    one = f"/v1/schedules/{schedule['id']}"
    writes = [
        ("POST", "/v1/schedules", schedule_json()),
        ("PATCH", one, {"name": "renamed"}),
        ("POST", one + "/pause", None),
        ("POST", one + "/trigger", None),
        ("DELETE", one, None),
        ("POST", "/v1/keys", {"name": "escalate", "scope": "write"}),
    ]
    for method, path, body in writes:
        reply = await reader.call(method, path, json_body=body)
        assert reply.status == 403, (method, path, reply.body)
        assert reply.body["type"] == "urn:steeple:problem:forbidden"
    after = (await api.call("GET", one)).body
    assert (after["name"], after["paused"], after["version"]) == (
        schedule["name"],
        False,
        schedule["version"],
    )
    assert len((await api.call("GET", "/v1/schedules")).body["items"]) == 1
    assert len((await api.call("GET", "/v1/keys")).body["items"]) == 2


async def test_a_revoked_key_answers_401_at_its_next_request(api: Api) -> None:
    issued = await issue(api, "write")
    holder = Api(app=api.app, key=issued["api_key"])
    assert (await holder.call("GET", "/v1/schedules")).status == 200
    assert (await api.call("DELETE", f"/v1/keys/{issued['id']}")).status == 204
    assert (await holder.call("GET", "/v1/schedules")).status == 401
    assert issued["id"] not in str((await api.call("GET", "/v1/keys")).body)
    assert (await api.call("DELETE", f"/v1/keys/{issued['id']}")).status == 404


async def test_the_last_write_key_cannot_be_revoked_but_may_be_once_another_exists(
    api: Api,
) -> None:
    (initial,) = (await api.call("GET", "/v1/keys")).body["items"]
    await issue(api, "read")
    refused = await api.call("DELETE", f"/v1/keys/{initial['id']}")
    assert refused.status == 409 and "last write key" in refused.body["detail"]
    assert (await api.call("GET", "/v1/schedules")).status == 200
    successor = Api(app=api.app, key=(await issue(api, "write"))["api_key"])
    assert (await successor.call("DELETE", f"/v1/keys/{initial['id']}")).status == 204
    assert (await api.call("GET", "/v1/schedules")).status == 401


async def test_another_tenants_key_id_is_404_and_is_not_revoked(api: Api, other: Api) -> None:
    issued = await issue(other, "write")
    assert (await api.call("DELETE", f"/v1/keys/{issued['id']}")).status == 404
    assert issued["id"] not in str((await api.call("GET", "/v1/keys")).body)
    holder = Api(app=api.app, key=issued["api_key"])
    assert (await holder.call("GET", "/v1/schedules")).status == 200


async def test_last_used_is_recorded_to_the_minute(api: Api, clock: FakeClock) -> None:
    issued = await issue(api, "read")
    holder = Api(app=api.app, key=issued["api_key"])

    async def last_used() -> str | None:
        keys = (await api.call("GET", "/v1/keys")).body["items"]
        return next(k["last_used_at"] for k in keys if k["id"] == issued["id"])  # type: ignore[no-any-return]

    assert await last_used() is None
    await holder.call("GET", "/v1/schedules")
    first = await last_used()
    assert first is not None
    clock.advance(LAST_USED_RESOLUTION_MS - 1)
    await holder.call("GET", "/v1/schedules")
    assert await last_used() == first
    clock.advance(1)
    await holder.call("GET", "/v1/schedules")
    assert (later := await last_used()) is not None and later > first


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"name": "", "scope": "read"}, ["name"]),
        ({"name": "x" * 101, "scope": "write"}, ["name"]),
        ({"name": "ok\n", "scope": "write"}, ["name"]),
        ({"name": "\u00bb\u0080", "scope": "write"}, ["name"]),
        ({"name": "ok", "scope": "admin"}, ["scope"]),
        ({"name": "ok"}, ["scope"]),
        ({"name": "ok", "scope": "read", "expires": 3}, ["expires"]),
        (["name"], ["body"]),
    ],
)
async def test_a_bad_key_request_is_422_naming_each_field_and_issues_nothing(
    api: Api, body: object, fields: list[str]
) -> None:
    reply = await api.call("POST", "/v1/keys", json_body=body)
    assert reply.status == 422 and reply.fields == fields
    assert len((await api.call("GET", "/v1/keys")).body["items"]) == 1
