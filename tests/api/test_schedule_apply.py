"""``POST /v1/schedules/apply``: the tenant's keyed schedules made to match a desired set,
all or nothing. Each step is the single operation (its row, version and event); an
unchanged set writes nothing; a change that keeps the timing keeps the cursor; prune
deletes only keyed schedules the set lost; any refused item refuses the whole set."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from appliance.core.events import Actor, ActorKind
from appliance.store.api_keys import Scope, insert_api_key
from appliance.store.infra.database import Database
from appliance.store.schedules import VersionMismatch
from appliance.store.usecases.apply import apply_schedules, keyed_versions, live_schedules
from tests.api.conftest import START, Api, FakeClock, Nudges, load_schedule, schedule_json

APPLY = "/v1/schedules/apply"


def item(key: str, **overrides: Any) -> dict[str, Any]:
    return {"key": key, **schedule_json(**{"name": key, **overrides})}


async def apply(api: Api, *items: dict[str, Any], **options: Any) -> dict[str, Any]:
    reply = await api.call("POST", APPLY, json_body={"schedules": list(items), **options})
    assert reply.status == 200, reply.body
    return reply.body  # type: ignore[no-any-return]


async def listed(api: Api) -> list[dict[str, Any]]:
    reply = await api.call("GET", "/v1/schedules", query={"limit": "100"})
    return reply.body["items"]  # type: ignore[no-any-return]


async def events(api: Api) -> list[dict[str, Any]]:
    reply = await api.call("GET", "/v1/events", query={"limit": "100"})
    return reply.body["items"]  # type: ignore[no-any-return]


async def test_an_apply_creates_each_item_as_a_create_would(api: Api, nudges: Nudges) -> None:
    plan = await apply(api, item("a"), item("b", cron="0 3 * * *", timezone="Europe/Berlin"))
    assert plan["applied"] and plan["changed"]
    assert [(s["key"], s["action"], s["index"]) for s in plan["items"]] == [
        ("a", "create", 0),
        ("b", "create", 1),
    ]
    assert plan["counts"] == {
        "create": 2, "change": 0, "delete": 0, "unchanged": 0, "unkeyed": 0, "unlisted": 0,
    }  # fmt: skip
    stored = {s["key"]: s for s in await listed(api)}
    assert {s["schedule_id"] for s in plan["items"]} == {s["id"] for s in stored.values()}
    alone = await api.create(**schedule_json(name="b", cron="0 3 * * *", timezone="Europe/Berlin"))
    read_only = {"id", "key", "version", "created_at", "updated_at", "next_runs", "warnings"}
    assert {k: v for k, v in stored["b"].items() if k not in read_only} == {
        k: v for k, v in alone.items() if k not in read_only
    }
    kinds = [(e["type"], e["schedule_id"]) for e in await events(api)]
    assert ("schedule.created", stored["a"]["id"]) in kinds
    assert ("schedule.created", stored["b"]["id"]) in kinds
    assert nudges.count >= 1


async def test_applying_the_same_set_again_changes_nothing(api: Api, nudges: Nudges) -> None:
    items = [item("a", headers={"Authorization": "Bearer s3cret"}), item("i", every="15m")]
    items[1].pop("cron")
    await apply(api, *items)
    before, seen_events, seen_nudges = await listed(api), await events(api), nudges.count
    plan = await apply(api, *items)
    assert not plan["changed"]
    assert [s["action"] for s in plan["items"]] == ["unchanged", "unchanged"]
    assert await listed(api) == before  # no version, no updated_at, same anchor
    assert await events(api) == seen_events
    assert nudges.count == seen_nudges


async def test_a_change_keeps_the_cursor_unless_the_timing_changes(
    api: Api, db: Database, clock: FakeClock
) -> None:
    await apply(api, item("a"))
    (created,) = await listed(api)
    cursor = load_schedule(db, api.tenant_id, created["id"]).next_fire_at
    clock.advance(60_000)
    plan = await apply(api, item("a", name="renamed", target_url="https://hooks.example.com/other"))
    (step,) = plan["items"]
    assert step["action"] == "change" and step["timing_changed"] is False
    assert step["changes"] == [
        {"field": "name", "old": "a", "new": "renamed"},
        {
            "field": "target_url",
            "old": "https://hooks.example.com/steeple",
            "new": "https://hooks.example.com/other",
        },
    ]
    changed = load_schedule(db, api.tenant_id, created["id"])
    assert changed.version == 2 and changed.next_fire_at == cursor
    updated = [e for e in await events(api) if e["type"] == "schedule.updated"]
    assert [e["data"]["changed"] for e in updated] == [["name", "target_url"]]
    plan = await apply(api, item("a", name="renamed", cron="0 4 * * *",
                                 target_url="https://hooks.example.com/other"))  # fmt: skip
    (step,) = plan["items"]
    assert step["timing_changed"] is True
    assert step["changes"] == [{"field": "cron", "old": "*/5 * * * *", "new": "0 4 * * *"}]
    assert load_schedule(db, api.tenant_id, created["id"]).next_fire_at != cursor


async def test_prune_deletes_only_the_keyed_schedules_the_set_lost(api: Api) -> None:
    await apply(api, item("a"), item("b"), item("c"))
    unkeyed = await api.create(name="made by hand")
    plan = await apply(api, item("a"), item("c"))  # without prune: b stays
    assert plan["counts"]["delete"] == 0 and plan["counts"]["unkeyed"] == 1
    assert plan["counts"]["unlisted"] == 1  # b, kept and said
    assert len(await listed(api)) == 4
    plan = await apply(api, item("a"), item("c"), prune=True)
    assert [(s["key"], s["action"]) for s in plan["items"]] == [
        ("a", "unchanged"),
        ("c", "unchanged"),
        ("b", "delete"),
    ]
    assert (plan["counts"]["unkeyed"], plan["counts"]["unlisted"]) == (1, 0)
    left = await listed(api)
    assert sorted(s["key"] or "" for s in left) == ["", "a", "c"]
    assert unkeyed["id"] in {s["id"] for s in left}
    deleted = [e for e in await events(api) if e["type"] == "schedule.deleted"]
    assert len(deleted) == 1


async def test_any_invalid_item_refuses_the_set_with_every_problem(api: Api) -> None:
    await apply(api, item("a"))
    before = await listed(api)
    bad = [
        item("a", name="changed"),
        item("b", cron="not cron"),
        {k: v for k, v in item("c").items() if k != "key"},
        item("d", jitter_seconds=-1, timeout_seconds=0),
        item("b"),
        item("e", target_url="https://nowhere.example.com/"),
    ]
    reply = await api.call("POST", APPLY, json_body={"schedules": bad, "prune": True})
    assert reply.status == 422, reply.body
    assert [(e.get("index"), e["field"]) for e in reply.body["errors"]] == [
        (1, "cron"),
        (2, "key"),
        (3, "jitter_seconds"),
        (3, "timeout_seconds"),
        (4, "key"),
    ]
    assert await listed(api) == before
    # the network check comes once the items read well, and names its item too
    reply = await api.call("POST", APPLY, json_body={"schedules": [item("a"), bad[5]]})
    assert reply.status == 422 and [e.get("index") for e in reply.body["errors"]] == [1]
    assert await listed(api) == before


async def test_a_dry_run_answers_the_plan_and_writes_nothing(api: Api) -> None:
    await apply(api, item("a"), item("b"))
    before, seen = await listed(api), await events(api)
    plan = await apply(api, item("a", cron="0 1 * * *"), item("c"), dry_run=True, prune=True)
    assert not plan["applied"] and plan["changed"]
    assert [(s["key"], s["action"]) for s in plan["items"]] == [
        ("a", "change"),
        ("c", "create"),
        ("b", "delete"),
    ]
    assert plan["items"][1]["schedule_id"] is None
    assert await listed(api) == before and await events(api) == seen


async def test_a_secret_header_sent_back_masked_keeps_its_value(api: Api, db: Database) -> None:
    await apply(api, item("a", headers={"Authorization": "Bearer one", "X-Team": "ops"}))
    masked = item("a", headers={"Authorization": "<masked>", "X-Team": "ops"})
    assert (await apply(api, masked))["items"][0]["action"] == "unchanged"
    plan = await apply(api, item("a", headers={"Authorization": "Bearer two", "X-Team": "dev"}))
    assert plan["items"][0]["changes"] == [
        {"field": "headers.Authorization", "old": "<masked>", "new": "<masked>"},
        {"field": "headers.X-Team", "old": "ops", "new": "dev"},
    ]
    (stored,) = await listed(api)
    assert stored["headers"]["Authorization"] == "Bearer two"
    reply = await api.call(
        "POST", APPLY, json_body={"schedules": [item("new", headers={"Authorization": "<masked>"})]}
    )
    assert reply.status == 422
    assert [(e["index"], e["field"]) for e in reply.body["errors"]] == [
        (0, "headers.Authorization")
    ]


async def test_an_apply_needs_a_write_key_and_sees_only_its_tenant(
    api: Api, other: Api, db: Database
) -> None:
    await apply(other, item("a"))
    plan = await apply(api, item("a"), prune=True)
    assert [s["action"] for s in plan["items"]] == ["create"]
    assert len(await listed(other)) == 1
    key = db.write_now(
        insert_api_key, tenant_id=api.tenant_id, name="ci", scope=Scope.READ, now=START
    )
    reader = Api(app=api.app, key=key.api_key, tenant_id=api.tenant_id)
    reply = await reader.call("POST", APPLY, json_body={"schedules": [], "dry_run": True})
    assert reply.status == 403


async def test_an_idempotency_key_replays_the_answer(api: Api) -> None:
    body = {"schedules": [item("a")]}
    headers = {"Idempotency-Key": "apply-1"}
    first = await api.call("POST", APPLY, json_body=body, headers=headers)
    again = await api.call("POST", APPLY, json_body=body, headers=headers)
    assert first.status == again.status == 200
    assert again.headers["Idempotent-Replayed"] == "true" and again.body == first.body
    assert len(await listed(api)) == 1
    reply = await api.call("POST", APPLY, json_body={"schedules": []}, headers=headers)
    assert reply.status == 422


async def test_the_request_itself_is_checked(api: Api) -> None:
    reply = await api.call("POST", APPLY, json_body={"schedule": [], "prune": "yes"})
    assert reply.status == 422
    assert sorted(reply.fields) == ["prune", "schedule", "schedules"]


async def test_an_apply_read_against_other_versions_is_refused_whole(
    api: Api, db: Database, clock: FakeClock
) -> None:
    """The view reads the keyed schedules, then writes: if one changed in between, the
    write refuses (the view reads again) and changes nothing."""
    await apply(api, item("a"), item("b"))
    current = db.read_now(live_schedules, tenant_id=api.tenant_id)
    seen = keyed_versions(current)
    await api.call("PATCH", f"/v1/schedules/{current[0].id}", json_body={"name": "edited"})
    spec = replace(current[1].spec, name="b, renamed")
    with pytest.raises(VersionMismatch):
        db.write_now(
            apply_schedules, tenant_id=api.tenant_id, specs=[spec], prune=True, seen=seen,
            now=clock.now, max_schedules=None, actor=Actor(kind=ActorKind.OPERATOR, id="cli"),
        )  # fmt: skip
    assert [s["version"] for s in await listed(api)] == [2, 1]


async def test_creates_and_timing_changes_carry_the_linters_warnings(api: Api) -> None:
    gap = {"cron": "30 2 * * *", "timezone": "Europe/Berlin"}  # the spring DST gap
    plan = await apply(api, item("a", **gap), item("b"))
    created, plain = plan["items"]
    alone = await api.create(**schedule_json(**gap))
    assert created["warnings"] == alone["warnings"] != []
    assert "warnings" not in plain
    plan = await apply(api, item("a", **gap, name="renamed"), item("b", **gap))
    renamed, moved = plan["items"]
    assert "warnings" not in renamed  # the timing stays: nothing new to say
    assert moved["timing_changed"] and moved["warnings"] == alone["warnings"]
