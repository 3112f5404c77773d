"""A schedule's ``key`` (docs/schedules.md, "Keys"): optional, set on create (single and
batch) and by PATCH (``null`` clears it), echoed on every representation, filterable
with ``?key=``; a malformed key is a 422 naming ``key``, a key another live schedule of
the tenant holds a 409 ``key-taken`` naming it — and neither changes anything."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api, schedule_json

TAKEN = "urn:steeple:problem:key-taken"


async def test_a_key_is_optional_and_echoed_everywhere(api: Api) -> None:
    keyless = await api.create()
    assert keyless["key"] is None
    keyed = await api.create(key="nightly-report.v2")
    assert keyed["key"] == "nightly-report.v2"
    read = await api.call("GET", f"/v1/schedules/{keyed['id']}")
    assert read.body["key"] == "nightly-report.v2"
    listed = await api.call("GET", "/v1/schedules")
    by_id = {item["id"]: item["key"] for item in listed.body["items"]}
    assert by_id == {keyless["id"]: None, keyed["id"]: "nightly-report.v2"}


async def test_the_list_filters_by_exact_key(api: Api) -> None:
    await api.create(key="alpha")
    wanted = await api.create(key="alpha-2")
    found = await api.call("GET", "/v1/schedules", query={"key": "alpha-2"})
    assert [item["id"] for item in found.body["items"]] == [wanted["id"]]
    none = await api.call("GET", "/v1/schedules", query={"key": "alpha-"})
    assert found.status == none.status == 200 and none.body["items"] == []
    bad = await api.call("GET", "/v1/schedules", query={"key": "Alpha"})
    assert bad.status == 422 and bad.body["errors"][0]["field"] == "key"


@pytest.mark.parametrize(
    "key", ["", "Nightly", "-lead", ".lead", "with space", "x" * 65, "café", 7, ["a"]]
)
async def test_a_malformed_key_is_refused_naming_the_field(api: Api, key: object) -> None:
    refused = await api.call("POST", "/v1/schedules", json_body=schedule_json(key=key))
    assert refused.status == 422
    assert [e["field"] for e in refused.body["errors"]] == ["key"]
    assert "lower-case letters, digits" in refused.body["errors"][0]["message"]
    listed = await api.call("GET", "/v1/schedules")
    assert listed.body["items"] == []


async def test_the_longest_and_shortest_keys_are_accepted(api: Api) -> None:
    assert (await api.create(key="a"))["key"] == "a"
    longest = "0" + "a._-" * 15 + "zzz"
    assert len(longest) == 64
    assert (await api.create(key=longest))["key"] == longest


async def test_a_taken_key_is_a_409_naming_it_and_creates_nothing(api: Api, other: Api) -> None:
    first = await api.create(key="rollup")
    refused = await api.call("POST", "/v1/schedules", json_body=schedule_json(key="rollup"))
    assert refused.status == 409
    assert refused.body["type"] == TAKEN and refused.body["key"] == "rollup"
    assert "'rollup'" in refused.body["detail"] and first["id"] in refused.body["detail"]
    assert refused.body["errors"] == [{"field": "key", "message": refused.body["detail"]}]
    assert len((await api.call("GET", "/v1/schedules")).body["items"]) == 1
    # Another tenant's keys are its own.
    assert (await other.create(key="rollup"))["key"] == "rollup"


async def test_a_deleted_schedules_key_is_free_again(api: Api) -> None:
    first = await api.create(key="rollup")
    assert (await api.call("DELETE", f"/v1/schedules/{first['id']}")).status == 204
    again = await api.create(key="rollup")
    assert again["id"] != first["id"] and again["key"] == "rollup"


async def test_patch_sets_changes_and_clears_a_key(api: Api) -> None:
    created = await api.create()
    path = f"/v1/schedules/{created['id']}"
    set_ = await api.call("PATCH", path, json_body={"key": "weekly"})
    assert set_.status == 200 and set_.body["key"] == "weekly"
    assert set_.body["version"] == created["version"] + 1
    same = await api.call("PATCH", path, json_body={"key": "weekly"})  # its own key: no clash
    assert same.status == 200 and same.body["version"] == set_.body["version"]
    cleared = await api.call("PATCH", path, json_body={"key": None})
    assert cleared.status == 200 and cleared.body["key"] is None
    events = await api.call("GET", "/v1/events")
    updates = [e["data"] for e in events.body["items"] if e["type"] == "schedule.updated"]
    assert updates == [
        {"version": set_.body["version"], "changed": ["key"]},
        {"version": cleared.body["version"], "changed": ["key"]},
    ]


async def test_patch_to_a_taken_key_is_a_409_and_changes_nothing(api: Api) -> None:
    await api.create(key="taken")
    mine = await api.create(key="mine")
    refused = await api.call("PATCH", f"/v1/schedules/{mine['id']}", json_body={"key": "taken"})
    assert refused.status == 409 and refused.body["type"] == TAKEN
    assert refused.body["key"] == "taken"
    malformed = await api.call("PATCH", f"/v1/schedules/{mine['id']}", json_body={"key": "A"})
    assert malformed.status == 422 and malformed.body["errors"][0]["field"] == "key"
    read = await api.call("GET", f"/v1/schedules/{mine['id']}")
    assert read.body["key"] == "mine" and read.body["version"] == mine["version"]


async def test_a_batch_sets_keys_and_refuses_a_taken_or_repeated_one(api: Api) -> None:
    items = [schedule_json(name=f"n{i}", key=f"item-{i}") for i in range(3)]
    created = await api.call("POST", "/v1/schedules/batch", json_body={"schedules": items})
    assert created.status == 201, created.body
    assert [s["key"] for s in created.body["items"]] == ["item-0", "item-1", "item-2"]
    again = [schedule_json(key="fresh"), schedule_json(key="item-1")]
    taken = await api.call("POST", "/v1/schedules/batch", json_body={"schedules": again})
    assert taken.status == 409 and taken.body["key"] == "item-1"
    assert taken.body["errors"] == [{"field": "key", "index": 1, "message": taken.body["detail"]}]
    twice = [schedule_json(key="twin"), schedule_json(key="twin")]
    repeated = await api.call("POST", "/v1/schedules/batch", json_body={"schedules": twice})
    assert repeated.status == 409 and "item 0 of this batch" in repeated.body["detail"]
    listed = await api.call("GET", "/v1/schedules")
    assert len(listed.body["items"]) == 3  # neither refused batch created anything
