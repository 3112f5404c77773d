"""``POST /v1/schedules/batch``: up to 1,000 schedules in one request, all or none. Each
created schedule is what a single create makes of the same body (fields, row, event);
any refused item — invalid, refused by the outbound policy, never firing — refuses the
batch with every problem named by item ``index`` and field, and nothing is created."""

from __future__ import annotations

from typing import Any

import pytest
from quart_trio import QuartTrio

from appliance.core.addresses import AddressPolicy
from appliance.core.instants import format_instant
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.api.conftest import START, Api, FakeClock, Nudges, build_app, schedule_json

BATCH = "/v1/schedules/batch"


def batch(*items: dict[str, Any]) -> dict[str, Any]:
    return {"schedules": list(items)}


async def listed(api: Api) -> list[dict[str, Any]]:
    reply = await api.call("GET", "/v1/schedules", query={"limit": "100"})
    assert reply.status == 200
    return reply.body["items"]  # type: ignore[no-any-return]


async def created_events(api: Api) -> list[dict[str, Any]]:
    reply = await api.call("GET", "/v1/events", query={"type": "schedule.created"})
    return reply.body["items"]  # type: ignore[no-any-return]


def stored_rows(db: Database, ids: list[str]) -> list[dict[str, Any]]:
    def read(conn: Any) -> list[dict[str, Any]]:
        marks = ", ".join("?" for _ in ids)  # portable: json_each is SQLite's alone
        cursor = conn.execute(f"SELECT * FROM schedules WHERE id IN ({marks}) ORDER BY id", ids)
        names = [d[0] for d in cursor.getdescription()]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    return db.read_now(read)


async def test_a_batch_creates_every_item_in_order_with_its_event(api: Api, nudges: Nudges) -> None:
    items = [
        schedule_json(name="a"),
        schedule_json(name="b", cron="0 3 * * *", timezone="Europe/Berlin"),
        {**schedule_json(name="c", every="15m"), "cron": None},
    ]
    reply = await api.call("POST", BATCH, json_body=batch(*items))
    assert reply.status == 201, reply.body
    created = reply.body["items"]
    assert [s["name"] for s in created] == ["a", "b", "c"]
    ids = [s["id"] for s in created]
    assert ids == sorted(ids) and len(set(ids)) == 3  # listed in the order given
    assert [s["id"] for s in await listed(api)] == ids
    for document in created:
        assert document["warnings"] == [] and document["version"] == 1
        fetched = (await api.call("GET", f"/v1/schedules/{document['id']}")).body
        assert {k: v for k, v in document.items() if k != "warnings"} == fetched
    events = await created_events(api)
    assert [e["schedule_id"] for e in events] == ids
    assert all(e["data"]["version"] == 1 and e["actor"] is not None for e in events)
    assert nudges.count == 1


async def test_a_schedule_created_in_a_batch_is_one_created_alone(api: Api, db: Database) -> None:
    body = schedule_json(
        cron="30 2 * * *",
        timezone="Europe/Berlin",
        jitter_seconds=30,
        headers=[["X-Team", "ops"]],
        retry={"max_attempts": 3},
        dst={"gap": "skip"},
    )  # a DST gap: the linter warns
    alone = await api.create(**body)
    together = (await api.call("POST", BATCH, json_body=batch(body))).body["items"][0]
    assert alone["warnings"] and together["warnings"] == alone["warnings"]

    def without_id(document: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in document.items() if k not in ("id", "next_runs")}

    assert without_id(together) == without_id(alone)
    # next_runs carry per-schedule jitter (derived from the id): same instants, own delays
    assert [r["scheduled_for"] for r in together["next_runs"]] == [
        r["scheduled_for"] for r in alone["next_runs"]
    ]
    row_alone, row_together = stored_rows(db, [alone["id"], together["id"]])
    for row in (row_alone, row_together):
        row.pop("id")
        row.pop("next_fire_at")  # due_at differs by jitter only; scheduled_for is the same
    assert row_together == row_alone
    first, second = await created_events(api)
    for event in (first, second):
        event.pop("id"), event.pop("seq"), event.pop("schedule_id")
    assert first == second


async def test_one_bad_item_in_the_middle_refuses_the_batch_naming_its_index_and_field(
    api: Api, nudges: Nudges
) -> None:
    reply = await api.call(
        "POST",
        BATCH,
        json_body=batch(schedule_json(), schedule_json(cron="61 * * * *", jitter="x"), {}),
    )
    assert reply.status == 422
    assert reply.body["type"] == "urn:steeple:problem:validation"
    errors = reply.body["errors"]
    assert {(e["index"], e["field"]) for e in errors} >= {(1, "cron"), (1, "jitter"), (2, "cron")}
    assert {e["index"] for e in errors} == {1, 2}
    assert "[1].cron" in reply.body["detail"]
    assert await listed(api) == [] and await created_events(api) == []
    assert nudges.count == 0


async def test_an_item_the_outbound_policy_refuses_refuses_the_batch(api: Api) -> None:
    reply = await api.call(
        "POST",
        BATCH,
        json_body=batch(
            schedule_json(),
            schedule_json(target_url="https://intranet.example.com/hook"),  # 10.1.2.3
            schedule_json(target_url="https://nowhere.example.com/hook"),  # no address
            schedule_json(target_url="https://intranet.example.com/other"),
        ),
    )
    assert reply.status == 422
    assert [(e["index"], e["field"]) for e in reply.body["errors"]] == [
        (1, "target_url"),
        (2, "target_url"),
        (3, "target_url"),
    ]
    assert await listed(api) == []


async def test_a_timing_that_never_fires_again_refuses_the_batch(
    api: Api, clock: FakeClock
) -> None:
    past = format_instant(clock.now - 60_000)
    one_off = {**schedule_json(at=past), "cron": None}
    reply = await api.call("POST", BATCH, json_body=batch(schedule_json(), one_off))
    assert reply.status == 422
    assert [(e["index"], e["field"]) for e in reply.body["errors"]] == [(1, "at")]
    assert await listed(api) == [] and await created_events(api) == []
    # alone, the same refusal names the field without an index, as before
    single = await api.call("POST", "/v1/schedules", json_body=one_off)
    assert single.status == 422 and single.body["errors"][0].keys() == {"field", "message"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (batch(*[schedule_json()] * 1001), "schedules"),
        (batch(), "schedules"),
        ({"schedules": schedule_json()}, "schedules"),
        ({**batch(schedule_json()), "dry_run": True}, "dry_run"),
        ([schedule_json()], "$"),
    ],
)
async def test_a_batch_of_no_or_too_many_items_is_refused(api: Api, body: Any, field: str) -> None:
    reply = await api.call("POST", BATCH, json_body=body)
    assert reply.status == 422
    assert [e["field"] for e in reply.body["errors"]] == [field]
    assert "index" not in reply.body["errors"][0]
    assert await listed(api) == []


async def test_a_thousand_items_larger_than_a_single_requests_limit_are_created(
    api: Api, db: Database
) -> None:
    item = schedule_json(payload={"padding": "x" * 300})  # ≈ 450 KB in all: over 256 KiB
    reply = await api.call("POST", BATCH, json_body=batch(*[item] * 1000))
    assert reply.status == 201, reply.body
    ids = [s["id"] for s in reply.body["items"]]
    assert len(set(ids)) == 1000 and ids == sorted(ids)
    (count,) = db.read_now(
        lambda conn: conn.execute(
            "SELECT COUNT(*) FROM events WHERE type = 'schedule.created' AND tenant_id = ?",
            (api.tenant_id,),
        ).fetchone()
    )
    assert count == 1000


async def test_a_body_over_the_batch_limit_answers_413(api: Api) -> None:
    item = schedule_json(body="x" * 9000)
    reply = await api.call("POST", BATCH, json_body=batch(*[item] * 1000))  # ≈ 9 MB
    assert reply.status == 413
    assert "8192 KiB" in reply.body["detail"]


async def test_batches_are_the_callers_tenants_only(api: Api, other: Api) -> None:
    mine = (await api.call("POST", BATCH, json_body=batch(schedule_json()))).body["items"]
    assert (await other.call("GET", f"/v1/schedules/{mine[0]['id']}")).status == 404
    assert await listed(other) == [] and await created_events(other) == []
    theirs = (await other.call("POST", BATCH, json_body=batch(schedule_json()))).body["items"]
    assert [s["id"] for s in await listed(api)] == [mine[0]["id"]]
    assert [s["id"] for s in await listed(other)] == [theirs[0]["id"]]


async def test_a_read_key_may_not_create_a_batch(api: Api) -> None:
    reply = await api.call("POST", "/v1/keys", json_body={"name": "r", "scope": "read"})
    reader = Api(app=api.app, key=reply.body["api_key"])
    refused = await reader.call("POST", BATCH, json_body=batch(schedule_json()))
    assert refused.status == 403
    assert await listed(api) == []


async def test_the_schedule_limit_counts_the_whole_batch(
    db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    app: QuartTrio = build_app(
        db=db, clock=clock, nudges=nudges, policy=AddressPolicy(), max_schedules=3
    )
    tenant = db.write_now(create_tenant, name="alpha", now=START)
    api = Api(app=app, key=tenant.api_key, tenant_id=tenant.tenant_id)
    await api.create()
    refused = await api.call("POST", BATCH, json_body=batch(*[schedule_json()] * 3))
    assert refused.status == 409
    assert refused.body["type"] == "urn:steeple:problem:schedule-limit"
    assert "max_schedules_per_tenant = 3" in refused.body["detail"]
    assert "send at most 2" in refused.body["detail"]
    assert len(await listed(api)) == 1
    fits = await api.call("POST", BATCH, json_body=batch(*[schedule_json()] * 2))
    assert fits.status == 201 and len(await listed(api)) == 3


async def test_an_idempotency_key_replays_the_batch_and_refuses_another_body(
    api: Api, nudges: Nudges
) -> None:
    body = batch(schedule_json(name="a"), schedule_json(name="b"))
    key = {"Idempotency-Key": "import-1"}
    first = await api.call("POST", BATCH, json_body=body, headers=key)
    assert first.status == 201 and "Idempotent-Replayed" not in first.headers
    again = await api.call("POST", BATCH, json_body=body, headers=key)
    assert again.status == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.body == first.body
    assert len(await listed(api)) == 2 and nudges.count == 1
    other_body = await api.call("POST", BATCH, json_body=batch(schedule_json()), headers=key)
    assert other_body.status == 422
    assert other_body.body["type"] == "urn:steeple:problem:idempotency-key-reused"
    assert len(await listed(api)) == 2
