"""Key and secret changes through the API are events in the tenant's feed, each naming
the key that made it, never carrying a key or a secret."""

from __future__ import annotations

import json
from typing import Any

from appliance.store.infra.database import Database
from tests.api.conftest import Api
from tests.engine.conftest import stored_events


async def feed(api: Api) -> list[dict[str, Any]]:
    reply = await api.call("GET", "/v1/events", query={"limit": "100"})
    assert reply.status == 200, reply.body
    return list(reply.body["items"])


def of_type(events: list[dict[str, Any]], type: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == type]


async def key_id_of(api: Api) -> str:
    keys = (await api.call("GET", "/v1/keys")).body["items"]
    return str(keys[0]["id"])


async def test_issuing_and_revoking_a_key_are_events_naming_the_key_that_did_it(
    api: Api,
) -> None:
    me = {"kind": "api_key", "id": await key_id_of(api)}
    issued = (await api.call("POST", "/v1/keys", json_body={"name": "ci", "scope": "read"})).body
    assert (await api.call("DELETE", f"/v1/keys/{issued['id']}")).status == 204
    events = await feed(api)
    [created] = of_type(events, "api_key.created")
    [revoked] = of_type(events, "api_key.revoked")
    data = {"key_id": issued["id"], "name": "ci", "scope": "read"}
    assert (created["actor"], created["data"]) == (me, data)
    assert (revoked["actor"], revoked["data"]) == (me, data)
    assert created["tenant_id"] == api.tenant_id and created["schedule_id"] is None
    text = json.dumps(events)
    assert issued["api_key"] not in text and str(api.key) not in text


async def test_rotating_and_revoking_a_secret_are_events_without_the_secret(api: Api) -> None:
    me = {"kind": "api_key", "id": await key_id_of(api)}
    [first] = (await api.call("GET", "/v1/signing-secrets")).body["items"]
    rotated = await api.call(
        "POST", "/v1/signing-secrets/rotate", json_body={"overlap_seconds": 60}
    )
    assert rotated.status == 201
    expired = await api.call("DELETE", f"/v1/signing-secrets/{first['id']}")
    assert expired.status == 200
    events = await feed(api)
    [rotation] = of_type(events, "signing_secret.rotated")
    [revocation] = of_type(events, "signing_secret.revoked")
    assert rotation["actor"] == revocation["actor"] == me
    assert rotation["data"] == {
        "secret_id": rotated.body["id"],
        "masked": rotated.body["masked"],
        "overlap_seconds": 60,
    }
    assert revocation["data"] == {"secret_id": first["id"], "masked": first["masked"]}
    assert rotated.body["secret"] not in json.dumps(events)


async def test_a_refused_change_leaves_no_event(api: Api) -> None:
    """The last write key cannot go, the last secret cannot expire: nothing recorded."""
    key_id = await key_id_of(api)
    assert (await api.call("DELETE", f"/v1/keys/{key_id}")).status == 409
    [only] = (await api.call("GET", "/v1/signing-secrets")).body["items"]
    assert (await api.call("DELETE", f"/v1/signing-secrets/{only['id']}")).status == 409
    assert of_type(await feed(api), "api_key.revoked") == []
    assert of_type(await feed(api), "signing_secret.revoked") == []


async def test_another_tenant_sees_none_of_it(api: Api, other: Api) -> None:
    await api.call("POST", "/v1/keys", json_body={"name": "ci", "scope": "read"})
    await api.call("POST", "/v1/signing-secrets/rotate", json_body={})
    assert await feed(other) == []


async def test_the_events_match_their_contracts(api: Api, db: Database) -> None:
    issued = (await api.call("POST", "/v1/keys", json_body={"name": "ci", "scope": "read"})).body
    await api.call("DELETE", f"/v1/keys/{issued['id']}")
    [first] = (await api.call("GET", "/v1/signing-secrets")).body["items"]
    await api.call("POST", "/v1/signing-secrets/rotate", json_body={"overlap_seconds": 60})
    await api.call("DELETE", f"/v1/signing-secrets/{first['id']}")
    stored = stored_events(db)
    assert [wire["type"] for wire, _ in stored] == [
        "api_key.created",
        "api_key.revoked",
        "signing_secret.rotated",
        "signing_secret.revoked",
    ]
    for wire, validator in stored:
        assert [e.message for e in validator.iter_errors(wire)] == [], wire


async def test_notification_url_changes_are_events_naming_the_key_and_the_origin_only(
    api: Api, db: Database
) -> None:
    """Set, the same again (nothing), replaced, removed; refused URLs leave no event."""
    me = {"kind": "api_key", "id": await key_id_of(api)}
    hook = "https://hooks.example.com/T0/B1/secret-token"
    assert (await api.call("PUT", "/v1/notifications", json_body={"url": hook})).status == 200
    assert (await api.call("PUT", "/v1/notifications", json_body={"url": hook})).status == 200
    refused = await api.call("PUT", "/v1/notifications", json_body={"url": "http://127.0.0.1/x"})
    assert refused.status == 422
    other = "https://hooks.example.com:8443/other"
    assert (await api.call("PUT", "/v1/notifications", json_body={"url": other})).status == 200
    assert (await api.call("DELETE", "/v1/notifications")).status == 204
    assert (await api.call("DELETE", "/v1/notifications")).status == 404
    events = of_type(await feed(api), "notifications.updated")
    assert [(e["actor"], e["data"]) for e in events] == [
        (me, {"change": "set", "origin": "https://hooks.example.com:443"}),
        (me, {"change": "replaced", "origin": "https://hooks.example.com:8443"}),
        (me, {"change": "removed", "origin": "https://hooks.example.com:8443"}),
    ]
    assert "secret-token" not in json.dumps(events)
    for wire, validator in stored_events(db):
        assert [e.message for e in validator.iter_errors(wire)] == [], wire
