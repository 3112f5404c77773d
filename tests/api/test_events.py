"""``GET /v1/events``: a tenant's feed by cursor — its own events and the system's, nothing
of another tenant's, every envelope valid against ``contracts/events``."""

from __future__ import annotations

from typing import Any

import pytest

from appliance.engine.planner import record_clock_jump
from appliance.store.infra.database import Database
from tests.api.conftest import Api, FakeClock
from tests.test_event_schemas import validators  # noqa: F401  (a fixture)


async def feed(api: Api, **query: str) -> dict[str, Any]:
    reply = await api.call("GET", "/v1/events", query=query)
    assert reply.status == 200, reply.body
    return reply.body  # type: ignore[no-any-return]


async def test_the_feed_holds_the_tenants_events_in_order_and_validates(
    api: Api,
    other: Api,
    validators: dict[str, Any],  # noqa: F811
) -> None:
    created = await api.create()
    await api.call("POST", f"/v1/schedules/{created['id']}/pause")
    await other.create()
    page = await feed(api)
    assert [e["type"] for e in page["items"]] == ["schedule.created", "schedule.paused"]
    assert {e["tenant_id"] for e in page["items"]} == {api.tenant_id}
    seqs = [e["seq"] for e in page["items"]]
    assert seqs == sorted(seqs) and page["next_cursor"] == seqs[-1]
    for item in page["items"]:
        validators[item["type"]].validate(item)


async def test_after_resumes_with_nothing_lost_or_repeated(api: Api) -> None:
    for _ in range(5):
        await api.create()
    seen: list[int] = []
    cursor = "0"
    while True:
        page = await feed(api, after=cursor, limit="2")
        if not page["items"]:
            assert page["next_cursor"] == int(cursor)
            break
        seen += [e["seq"] for e in page["items"]]
        cursor = str(page["next_cursor"])
    assert len(seen) == 5 == len(set(seen)) and seen == sorted(seen)


async def test_system_events_reach_every_tenant_but_other_tenants_events_do_not(
    api: Api, other: Api, db: Database, clock: FakeClock
) -> None:
    await other.create()
    db.write_now(record_clock_jump, wall_delta_ms=-60_000, monotonic_delta_ms=1000, now=clock.now)
    for tenant in (api, other):
        types = [e["type"] for e in (await feed(tenant))["items"]]
        assert "clock.jump_detected" in types
    assert [e["type"] for e in (await feed(api))["items"]] == ["clock.jump_detected"]


async def test_filters_by_type_and_schedule(api: Api) -> None:
    first, second = await api.create(), await api.create()
    await api.call("POST", f"/v1/schedules/{first['id']}/pause")
    await api.call("POST", f"/v1/schedules/{second['id']}/pause")
    paused = await feed(api, type="schedule.paused")
    assert [e["schedule_id"] for e in paused["items"]] == [first["id"], second["id"]]
    mine = await feed(api, schedule_id=second["id"])
    assert [e["type"] for e in mine["items"]] == ["schedule.created", "schedule.paused"]
    reply = await api.call(
        "GET", "/v1/events", query=[("type", "schedule.created"), ("type", "schedule.paused")]
    )
    assert len(reply.body["items"]) == 4


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"after": "-1"}, "after"),
        ({"after": "9223372036854775808"}, "after"),
        ({"after": "1e3"}, "after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"type": "schedule.exploded"}, "type"),
    ],
)
async def test_bad_parameters_are_422_naming_the_field(
    api: Api, query: dict[str, str], field: str
) -> None:
    reply = await api.call("GET", "/v1/events", query=query)
    assert reply.status == 422 and reply.fields == [field]


async def test_the_stream_checks_after_even_beside_last_event_id(api: Api) -> None:
    reply = await api.call(
        "GET",
        "/v1/events/stream",
        query={"after": "9223372036854775808"},
        headers={"Last-Event-ID": "0"},
    )
    assert reply.status == 422 and reply.fields == ["after"]


async def test_the_feed_is_the_audit_trail_who_changed_what(api: Api) -> None:
    ops = (await api.call("POST", "/v1/keys", json_body={"name": "ops", "scope": "write"})).body
    operator = Api(app=api.app, key=ops["api_key"], tenant_id=api.tenant_id)
    created = await api.create()
    patched = await operator.call(
        "PATCH", f"/v1/schedules/{created['id']}", json_body={"cron": "0 * * * *", "name": "hourly"}
    )
    assert patched.status == 200
    (updated,) = (await feed(api, type="schedule.updated"))["items"]
    assert updated["actor"] == {"kind": "api_key", "id": ops["id"]}
    assert updated["data"] == {"version": 2, "changed": ["name", "cron"]}
    (made,) = (await feed(api, type="schedule.created"))["items"]
    assert made["actor"]["kind"] == "api_key" and made["actor"]["id"] != ops["id"]
