"""Secret-bearing tenant headers (``Authorization``, ``X-Api-Key`` …) are masked for a
read key on every schedule read, as ``/curl`` masks them; a write key reads them back, and
a patch that sends the mask back keeps the stored secret (docs/receiver.md)."""

from __future__ import annotations

from typing import Any

from appliance.core.secret_headers import MASK
from tests.api.conftest import Api, schedule_json

SECRET = "Bearer s3cr3t-receiver-token"
HEADERS = {"Authorization": SECRET, "X-Api-Key": "k-123456", "X-Team": "payments"}
SHOWN_MASKED = {"Authorization": MASK, "X-Api-Key": MASK, "X-Team": "payments"}


async def read_key_of(api: Api) -> Api:
    reply = await api.call("POST", "/v1/keys", json_body={"name": "dash", "scope": "read"})
    assert reply.status == 201, reply.body
    return Api(app=api.app, key=reply.body["api_key"], tenant_id=api.tenant_id)


async def schedule_with_secrets(api: Api) -> dict[str, Any]:
    return await api.create(headers=HEADERS)


async def test_a_read_key_sees_secret_header_values_masked_on_get_and_list(api: Api) -> None:
    created = await schedule_with_secrets(api)
    reader = await read_key_of(api)
    one = await reader.call("GET", f"/v1/schedules/{created['id']}")
    listed = await reader.call("GET", "/v1/schedules")
    assert one.status == 200 and one.body["headers"] == SHOWN_MASKED
    assert [item["headers"] for item in listed.body["items"]] == [SHOWN_MASKED]
    assert SECRET not in str(one.body) + str(listed.body)
    assert one.headers["ETag"] == f'"{created["version"]}"'


async def test_a_write_key_reads_the_values_back(api: Api) -> None:
    created = await schedule_with_secrets(api)
    assert created["headers"] == HEADERS
    one = await api.call("GET", f"/v1/schedules/{created['id']}")
    listed = await api.call("GET", "/v1/schedules")
    assert one.body["headers"] == HEADERS
    assert listed.body["items"][0]["headers"] == HEADERS


async def test_a_patch_sending_the_masked_view_back_keeps_the_secrets(api: Api) -> None:
    created = await schedule_with_secrets(api)
    seen = dict(SHOWN_MASKED)  # what a read key is shown
    unchanged = await api.call(
        "PATCH", f"/v1/schedules/{created['id']}", json_body={"headers": seen}
    )
    assert unchanged.status == 200 and unchanged.body["version"] == created["version"]
    edited = {**seen, "X-Team": "billing"}
    patched = await api.call(
        "PATCH", f"/v1/schedules/{created['id']}", json_body={"headers": edited}
    )
    assert patched.status == 200 and patched.body["headers"] == {**HEADERS, "X-Team": "billing"}


async def test_the_mask_is_never_stored_as_a_credential(api: Api) -> None:
    """On a create, or for a header the schedule does not have, the mask is refused."""
    created = await schedule_with_secrets(api)
    path = f"/v1/schedules/{created['id']}"
    new_header = await api.call("PATCH", path, json_body={"headers": {**HEADERS, "X-Token": MASK}})
    assert (new_header.status, new_header.fields) == (422, ["headers.X-Token"])
    copied = await api.call("POST", "/v1/schedules", json_body=schedule_json(headers=SHOWN_MASKED))
    assert (copied.status, sorted(copied.fields)) == (
        422,
        ["headers.Authorization", "headers.X-Api-Key"],
    )
    assert "send the credential itself" in str(copied.body)
    assert (await api.call("GET", path)).body["headers"] == HEADERS


async def test_a_patch_may_still_replace_or_drop_a_secret(api: Api) -> None:
    created = await schedule_with_secrets(api)
    path = f"/v1/schedules/{created['id']}"
    replaced = await api.call("PATCH", path, json_body={"headers": {"Authorization": "Bearer new"}})
    assert replaced.body["headers"] == {"Authorization": "Bearer new"}
