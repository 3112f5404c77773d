"""/v1/schedules through the real app: happy paths, validation, ETags, pagination,
idempotent creates, and what pause/resume/patch do to planned rows."""

from __future__ import annotations

from typing import Any

import pytest
import referencing
from jsonschema import Draft202012Validator

from appliance.api.events import render_event
from appliance.core.addresses import AddressPolicy
from appliance.core.instants import parse_instant
from appliance.core.schedules import PayloadKind
from appliance.store.api_keys import list_api_keys
from appliance.store.events import list_events
from appliance.store.request_keys import prune_request_keys
from appliance.store.runs import list_runs
from appliance.store.schedules import first_fire_at
from tests.api.conftest import (
    START,
    Api,
    FakeClock,
    Nudges,
    build_app,
    load_schedule,
    plan_runs,
    schedule_json,
)
from tests.test_event_schemas import SCHEMAS


async def test_create_returns_the_schedule_with_location_etag_and_next_runs(
    api: Api, nudges: Nudges
) -> None:
    reply = await api.call("POST", "/v1/schedules", json_body=schedule_json())
    assert reply.status == 201
    body = reply.body
    assert body["id"].startswith("sch_")
    assert reply.headers["Location"] == f"/v1/schedules/{body['id']}"
    assert reply.headers["ETag"] == '"1"'
    assert body["version"] == 1
    assert body["payload"] == {"report": "nightly", "n": 1}
    assert "body" not in body
    assert body["timezone"] == "UTC"
    assert body["content_type"] == "application/json"
    assert body["headers"] == {}
    assert body["jitter_seconds"] == 0
    assert body["catchup"] == {"policy": "all", "window_seconds": 3600}
    assert body["retry"] == {"max_attempts": 8, "backoff": "default", "max_age_seconds": 604800}
    assert body["timeout_seconds"] == 30
    assert body["paused"] is False
    assert body["created_at"] == body["updated_at"] == "2026-03-02T10:00:00.400Z"
    # */5 after 10:00:00.400: 10:05, 10:10, ... — no jitter, so due_at == scheduled_for.
    assert body["next_runs"] == [
        {"scheduled_for": f"2026-03-02T10:{m:02d}:00Z", "due_at": f"2026-03-02T10:{m:02d}:00Z"}
        for m in (5, 10, 15, 20, 25)
    ]
    assert nudges.count == 1


async def test_create_stores_compact_payload_bytes_and_the_planning_cursor(
    api: Api, db: Any
) -> None:
    created = await api.create(payload={"b": [1, 2.5, "é"], "a": None})
    schedule = load_schedule(db, api.tenant_id, created["id"])
    assert schedule.spec.payload_kind is PayloadKind.JSON
    assert schedule.spec.body == '{"b":[1,2.5,"é"],"a":null}'.encode()
    assert schedule.next_fire_at == parse_instant("2026-03-02T10:05:00Z")
    events = db.read_now(list_events, tenant_id=api.tenant_id)
    assert [(e.type.value, e.data) for e in events] == [("schedule.created", {"version": 1})]


async def test_a_body_is_echoed_verbatim_with_its_content_type(api: Api, db: Any) -> None:
    text = "line one\n  {not json}\t"
    created = await api.create(
        payload=..., body=text, content_type="text/plain; charset=utf-8", headers={"X-Team": "a"}
    )
    assert created["body"] == text
    assert "payload" not in created
    assert created["content_type"] == "text/plain; charset=utf-8"
    assert created["headers"] == {"X-Team": "a"}
    assert load_schedule(db, api.tenant_id, created["id"]).spec.body == text.encode()


async def test_jitter_shows_in_next_runs_due_at_only(api: Api) -> None:
    created = await api.create(cron="0 * * * *", jitter_seconds=600)
    for run in created["next_runs"]:
        scheduled, due = parse_instant(run["scheduled_for"]), parse_instant(run["due_at"])
        assert scheduled % 3_600_000 == 0
        assert scheduled <= due < scheduled + 600_000
    assert len({r["due_at"] for r in created["next_runs"]}) == 5


async def test_get_returns_the_schedule_with_its_etag(api: Api) -> None:
    created = await api.create()
    reply = await api.call("GET", f"/v1/schedules/{created['id']}")
    assert reply.status == 200
    assert reply.headers["ETag"] == '"1"'
    assert created.pop("warnings") == []  # only a create's or an update's answer has them
    assert reply.body == created


async def test_timezone_and_dst_reach_next_runs(api: Api, clock: FakeClock) -> None:
    clock.now = parse_instant("2026-03-07T12:00:00Z")
    created = await api.create(cron="30 2 * * *", timezone="America/New_York")
    # 2026-03-08 02:30 local does not exist: fires at 03:00 EDT = 07:00Z (ADR 0037).
    assert [r["scheduled_for"] for r in created["next_runs"][:2]] == [
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:30:00Z",
    ]


# --- validation --------------------------------------------------------------------------

BIG = "x" * (64 * 1024 + 1)

INVALID = [
    pytest.param({"cron": "0 25 * * *"}, "cron", id="cron-hour-out-of-range"),
    pytest.param({"cron": "0 0 31 2 *"}, "cron", id="cron-never-fires"),
    pytest.param({"timezone": "Mars/Olympus_Mons"}, "timezone", id="unknown-timezone"),
    pytest.param({"target_url": "http://127.0.0.1:8080/hook"}, "target_url", id="loopback"),
    pytest.param({"target_url": "http://169.254.169.254/"}, "target_url", id="metadata"),
    pytest.param({"target_url": "https://intranet.example.com/"}, "target_url", id="private-dns"),
    pytest.param({"target_url": "https://nowhere.example.com/"}, "target_url", id="no-dns"),
    pytest.param({"target_url": "ftp://hooks.example.com/"}, "target_url", id="scheme"),
    pytest.param({"headers": {"X-Signature": "forged"}}, "headers.X-Signature", id="reserved"),
    pytest.param({"headers": {"Host": "evil"}}, "headers.Host", id="reserved-host"),
    pytest.param({"body": "text"}, "body", id="payload-and-body"),
    pytest.param({"payload": ...}, "payload", id="neither-payload-nor-body"),
    pytest.param({"payload": ..., "body": BIG}, "body", id="body-too-large"),
    pytest.param({"payload": {"x": BIG}}, "payload", id="payload-too-large"),
    pytest.param({"jitter_seconds": 3601}, "jitter_seconds", id="jitter-too-large"),
    pytest.param({"jitter_seconds": -1}, "jitter_seconds", id="jitter-negative"),
    pytest.param({"jitter_seconds": True}, "jitter_seconds", id="jitter-bool"),
    pytest.param({"catchup": {"policy": "some"}}, "catchup.policy", id="catchup-policy"),
    pytest.param({"catchup": {"windw": 5}}, "catchup.windw", id="catchup-unknown"),
    pytest.param({"retry": {"max_attempts": 0}}, "retry.max_attempts", id="max-attempts-0"),
    pytest.param({"retry": {"max_attempts": 16}}, "retry.max_attempts", id="max-attempts-16"),
    pytest.param({"timeout_seconds": 301}, "timeout_seconds", id="timeout"),
    pytest.param({"paused": "yes"}, "paused", id="paused-not-bool"),
    pytest.param({"name": ...}, "name", id="name-missing"),
    pytest.param({"name": "   "}, "name", id="name-blank"),
    pytest.param({"content_type": "json"}, "content_type", id="content-type"),
    pytest.param({"jitter": 5}, "jitter", id="unknown-field"),
    pytest.param({"id": "sch_x"}, "id", id="read-only-field"),
]


@pytest.mark.parametrize(("overrides", "field"), INVALID)
async def test_invalid_input_answers_422_naming_the_field(
    api: Api, nudges: Nudges, overrides: dict[str, Any], field: str
) -> None:
    reply = await api.call("POST", "/v1/schedules", json_body=schedule_json(**overrides))
    assert reply.status == 422, reply.body
    assert reply.body["type"] == "urn:steeple:problem:validation"
    assert field in reply.fields
    assert all(error["message"] for error in reply.body["errors"])
    assert nudges.count == 0
    listing = await api.call("GET", "/v1/schedules")
    assert listing.body["items"] == []


async def test_every_problem_is_reported_at_once(api: Api) -> None:
    reply = await api.call(
        "POST",
        "/v1/schedules",
        json_body={
            "name": 5,
            "cron": "61 * * * *",
            "timezone": "Nowhere/Land",
            "target_url": "http://10.0.0.1/",
            "payload": 1,
            "body": "x",
            "jitter_seconds": 9999,
            "catchup": {"policy": "most"},
            "retry": {"max_attempts": 99},
            "extra": 1,
        },
    )
    assert reply.status == 422
    assert set(reply.fields) >= {
        "name",
        "cron",
        "timezone",
        "target_url",
        "body",
        "jitter_seconds",
        "catchup.policy",
        "retry.max_attempts",
        "extra",
    }


async def test_the_size_error_names_the_limit(api: Api) -> None:
    reply = await api.call("POST", "/v1/schedules", json_body=schedule_json(payload=..., body=BIG))
    (error,) = reply.body["errors"]
    assert error["field"] == "body"
    assert "65536 bytes" in error["message"]
    assert "64 KiB" in error["message"]


async def test_an_allow_listed_range_is_accepted(
    api: Api, db: Any, clock: FakeClock, nudges: Nudges
) -> None:
    policy = AddressPolicy.parse(["127.0.0.0/8"])
    allowed = build_app(db=db, clock=clock, nudges=nudges, policy=policy)
    tenant = Api(app=allowed, key=api.key, tenant_id=api.tenant_id)
    created = await tenant.create(target_url="http://127.0.0.1:8080/hook")
    assert created["target_url"] == "http://127.0.0.1:8080/hook"
    metadata = await tenant.call(
        "POST", "/v1/schedules", json_body=schedule_json(target_url="http://169.254.169.254/")
    )
    assert metadata.status == 422


# --- list and pagination -----------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 3, 7, 50])
async def test_pagination_walks_every_item_exactly_once(api: Api, other: Api, limit: int) -> None:
    created = [(await api.create(name=f"s{i}"))["id"] for i in range(7)]
    await other.create(name="not mine")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": str(limit)} | ({"cursor": cursor} if cursor else {})
        reply = await api.call("GET", "/v1/schedules", query=query)
        assert reply.status == 200
        assert len(reply.body["items"]) <= limit
        seen.extend(item["id"] for item in reply.body["items"])
        cursor = reply.body["next_cursor"]
        pages += 1
        if cursor is None:
            break
    assert seen == sorted(created)  # keyset order: by id
    assert pages == -(-7 // limit)


async def test_a_page_survives_deletions_between_requests(api: Api) -> None:
    ids = sorted([(await api.create(name=f"s{i}"))["id"] for i in range(4)])
    first = await api.call("GET", "/v1/schedules", query={"limit": "2"})
    assert [i["id"] for i in first.body["items"]] == ids[:2]
    await api.call("DELETE", f"/v1/schedules/{ids[1]}")
    second = await api.call(
        "GET", "/v1/schedules", query={"limit": "2", "cursor": first.body["next_cursor"]}
    )
    assert [i["id"] for i in second.body["items"]] == ids[2:]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "garbage!"}, "cursor"),
        ({"cursor": "cnVuOjEyMw"}, "cursor"),  # a runs cursor ("run:123") on schedules
    ],
)
async def test_bad_paging_parameters_answer_422(
    api: Api, query: dict[str, str], field: str
) -> None:
    reply = await api.call("GET", "/v1/schedules", query=query)
    assert reply.status == 422
    assert reply.fields == [field]


# --- patch, etag, if-match ---------------------------------------------------------------


async def test_patch_merges_fields_and_bumps_the_version(api: Api, nudges: Nudges) -> None:
    created = await api.create(catchup={"policy": "skip", "window_seconds": 60})
    reply = await api.call(
        "PATCH",
        f"/v1/schedules/{created['id']}",
        json_body={"name": "renamed", "catchup": {"window_seconds": 120}, "headers": {"X-A": "1"}},
    )
    assert reply.status == 200, reply.body
    assert reply.headers["ETag"] == '"2"'
    body = reply.body
    assert body["name"] == "renamed"
    assert body["catchup"] == {"policy": "skip", "window_seconds": 120}
    assert body["headers"] == {"X-A": "1"}
    assert body["payload"] == created["payload"]
    assert body["version"] == 2
    assert nudges.count == 2


async def test_patch_null_resets_to_the_default(api: Api) -> None:
    created = await api.create(timezone="Europe/Berlin", jitter_seconds=30)
    reply = await api.call(
        "PATCH",
        f"/v1/schedules/{created['id']}",
        data='{"timezone": null, "jitter_seconds": null}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert reply.status == 200
    assert (reply.body["timezone"], reply.body["jitter_seconds"]) == ("UTC", 0)


async def test_patch_switches_payload_to_body(api: Api) -> None:
    created = await api.create()
    reply = await api.call("PATCH", f"/v1/schedules/{created['id']}", json_body={"body": "plain"})
    assert reply.status == 200
    assert reply.body["body"] == "plain"
    assert "payload" not in reply.body


async def test_patch_is_revalidated_as_a_whole(api: Api) -> None:
    created = await api.create()
    reply = await api.call(
        "PATCH",
        f"/v1/schedules/{created['id']}",
        json_body={"cron": "bad", "headers": {"webhook-id": "x"}, "version": 9},
    )
    assert reply.status == 422
    assert set(reply.fields) >= {"cron", "headers.webhook-id", "version"}
    unchanged = await api.call("GET", f"/v1/schedules/{created['id']}")
    assert unchanged.body == {k: v for k, v in created.items() if k != "warnings"}


async def test_patch_to_a_blocked_destination_is_refused(api: Api) -> None:
    created = await api.create()
    reply = await api.call(
        "PATCH", f"/v1/schedules/{created['id']}", json_body={"target_url": "http://[::1]/"}
    )
    assert reply.status == 422
    assert reply.fields == ["target_url"]


async def test_if_match_mismatch_answers_412_and_changes_nothing(api: Api) -> None:
    created = await api.create()
    path = f"/v1/schedules/{created['id']}"
    ok = await api.call("PATCH", path, json_body={"name": "v2"}, headers={"If-Match": '"1"'})
    assert ok.status == 200
    stale = await api.call("PATCH", path, json_body={"name": "v3"}, headers={"If-Match": '"1"'})
    assert stale.status == 412
    assert stale.body["type"] == "urn:steeple:problem:precondition-failed"
    weak = await api.call("PATCH", path, json_body={"name": "v3"}, headers={"If-Match": 'W/"2"'})
    assert weak.status == 412
    for action in ("DELETE", "POST pause", "POST resume"):
        method, _, suffix = action.partition(" ")
        target = f"{path}/{suffix}" if suffix else path
        reply = await api.call(method, target, headers={"If-Match": '"7"'})
        assert reply.status == 412, action
    current = await api.call("GET", path)
    assert current.body["name"] == "v2"
    assert current.headers["ETag"] == '"2"'
    star = await api.call("DELETE", path, headers={"If-Match": "*"})
    assert star.status == 204


async def test_an_invalid_patch_is_422_even_with_a_stale_if_match(api: Api) -> None:
    """Retrying with a fresh ETag could never make an invalid body valid: 422 comes first."""
    created = await api.create()
    path = f"/v1/schedules/{created['id']}"
    for tag in ('"9"', '"x"'):
        reply = await api.call(
            "PATCH", path, json_body={"timezone": "Not/AZone"}, headers={"If-Match": tag}
        )
        assert reply.status == 422, tag
        assert reply.fields == ["timezone"]
    stale = await api.call("PATCH", path, json_body={"name": "n"}, headers={"If-Match": '"9"'})
    assert stale.status == 412


async def test_patch_with_the_wrong_content_type_is_415(api: Api) -> None:
    created = await api.create()
    reply = await api.call(
        "PATCH",
        f"/v1/schedules/{created['id']}",
        data="name=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert reply.status == 415


# --- delete, pause, resume ---------------------------------------------------------------


async def test_delete_hides_the_schedule(api: Api, db: Any, nudges: Nudges) -> None:
    created = await api.create()
    reply = await api.call("DELETE", f"/v1/schedules/{created['id']}")
    assert reply.status == 204
    assert reply.body is None
    assert (await api.call("GET", f"/v1/schedules/{created['id']}")).status == 404
    assert (await api.call("DELETE", f"/v1/schedules/{created['id']}")).status == 404
    assert (await api.call("GET", "/v1/schedules")).body["items"] == []
    types = [e.type.value for e in db.read_now(list_events, tenant_id=api.tenant_id)]
    assert types == ["schedule.created", "schedule.deleted"]
    assert nudges.count == 2


async def test_pause_withdraws_future_rows_and_resume_replans_from_now(
    api: Api, db: Any, clock: FakeClock
) -> None:
    created = await api.create()
    schedule = load_schedule(db, api.tenant_id, created["id"])
    planned = plan_runs(db, schedule, after=START, count=3)
    assert (
        len(db.read_now(list_runs, tenant_id=api.tenant_id, schedule_id=schedule.id, limit=10)) == 3
    )

    paused = await api.call("POST", f"/v1/schedules/{created['id']}/pause")
    assert paused.status == 200
    assert paused.body["paused"] is True
    assert paused.body["next_runs"] == []
    assert paused.headers["ETag"] == '"2"'
    assert db.read_now(list_runs, tenant_id=api.tenant_id, schedule_id=schedule.id, limit=10) == []
    again = await api.call("POST", f"/v1/schedules/{created['id']}/pause")
    assert again.body["version"] == 2  # pausing twice changes nothing

    clock.now = planned[-1] + 3_600_000  # an hour after the last planned slot
    resumed = await api.call("POST", f"/v1/schedules/{created['id']}/resume")
    assert resumed.status == 200
    assert resumed.body["paused"] is False
    first = parse_instant(resumed.body["next_runs"][0]["scheduled_for"])
    assert first == planned[-1] + 3_600_000 + 5 * 60_000
    stored = load_schedule(db, api.tenant_id, created["id"])
    assert stored.next_fire_at == first  # nothing from the paused hour is caught up
    types = [e.type.value for e in db.read_now(list_events, tenant_id=api.tenant_id)]
    assert types == ["schedule.created", "schedule.paused", "schedule.resumed"]


async def test_pause_cancels_a_due_row_that_was_not_yet_delivered(
    api: Api, db: Any, clock: FakeClock
) -> None:
    created = await api.create()
    schedule = load_schedule(db, api.tenant_id, created["id"])
    (slot,) = plan_runs(db, schedule, after=START, count=1)
    clock.now = slot + 500  # due, not yet claimed
    await api.call("POST", f"/v1/schedules/{created['id']}/pause")
    (run,) = db.read_now(list_runs, tenant_id=api.tenant_id, schedule_id=schedule.id, limit=10)
    assert run.state.value == "cancelled"


async def test_a_timing_change_withdraws_planned_rows_and_rederives_the_cursor(
    api: Api, db: Any
) -> None:
    created = await api.create()
    schedule = load_schedule(db, api.tenant_id, created["id"])
    plan_runs(db, schedule, after=START, count=3)
    name_only = await api.call(
        "PATCH", f"/v1/schedules/{created['id']}", json_body={"name": "renamed"}
    )
    assert name_only.status == 200
    assert (
        len(db.read_now(list_runs, tenant_id=api.tenant_id, schedule_id=schedule.id, limit=10)) == 3
    )
    reply = await api.call(
        "PATCH", f"/v1/schedules/{created['id']}", json_body={"cron": "0 12 * * *"}
    )
    assert reply.status == 200
    assert db.read_now(list_runs, tenant_id=api.tenant_id, schedule_id=schedule.id, limit=10) == []
    stored = load_schedule(db, api.tenant_id, created["id"])
    assert stored.next_fire_at == parse_instant("2026-03-02T12:00:00Z")
    assert stored.next_fire_at == first_fire_at(stored.spec, schedule_id=stored.id, now=START)


# --- idempotent creates ------------------------------------------------------------------


async def test_idempotency_key_replays_the_stored_response(
    api: Api, nudges: Nudges, clock: FakeClock
) -> None:
    headers = {"Idempotency-Key": "7b0c7c1e-6b0e-4c50-8a57-4d0b3c1d2e3f"}
    first = await api.call("POST", "/v1/schedules", json_body=schedule_json(), headers=headers)
    assert first.status == 201
    clock.advance(10_000)
    reordered = dict(reversed(list(schedule_json().items())))
    second = await api.call("POST", "/v1/schedules", json_body=reordered, headers=headers)
    assert second.status == 201
    assert second.body == first.body
    assert second.headers["Location"] == first.headers["Location"]
    assert second.headers["Idempotent-Replayed"] == "true"
    assert nudges.count == 1
    assert len((await api.call("GET", "/v1/schedules")).body["items"]) == 1


async def test_idempotency_key_with_another_body_is_refused(api: Api) -> None:
    headers = {"Idempotency-Key": "k1"}
    await api.call("POST", "/v1/schedules", json_body=schedule_json(), headers=headers)
    reply = await api.call(
        "POST", "/v1/schedules", json_body=schedule_json(name="other"), headers=headers
    )
    assert reply.status == 422
    assert reply.body["type"] == "urn:steeple:problem:idempotency-key-reused"
    assert reply.fields == ["Idempotency-Key"]
    assert len((await api.call("GET", "/v1/schedules")).body["items"]) == 1


async def test_idempotency_keys_are_per_tenant_and_expire(
    api: Api, other: Api, clock: FakeClock
) -> None:
    headers = {"Idempotency-Key": "same"}
    mine = await api.call("POST", "/v1/schedules", json_body=schedule_json(), headers=headers)
    theirs = await other.call("POST", "/v1/schedules", json_body=schedule_json(), headers=headers)
    assert theirs.status == 201
    assert theirs.body["id"] != mine.body["id"]
    clock.advance(24 * 3_600_000 + 1)
    later = await api.call("POST", "/v1/schedules", json_body=schedule_json(), headers=headers)
    assert later.status == 201
    assert later.body["id"] != mine.body["id"]


async def test_expired_request_keys_are_pruned(api: Api, db: Any, clock: FakeClock) -> None:
    for key in ("a", "b"):
        headers = {"Idempotency-Key": key}
        await api.call("POST", "/v1/schedules", json_body=schedule_json(), headers=headers)
        clock.advance(12 * 3_600_000)
    assert db.write_now(prune_request_keys, now=clock.now) == 1  # "a" is 24 h old
    assert db.write_now(prune_request_keys, now=clock.now) == 0


async def test_a_patch_that_changes_nothing_keeps_the_version(api: Api, db: Any) -> None:
    created = await api.create()
    for patch in ({}, {"name": created["name"]}, {"payload": created["payload"]}):
        reply = await api.call("PATCH", f"/v1/schedules/{created['id']}", json_body=patch)
        assert reply.status == 200
        assert reply.headers["ETag"] == '"1"'
    assert [e.type.value for e in db.read_now(list_events, tenant_id=api.tenant_id)] == [
        "schedule.created"
    ]


async def test_schedule_events_match_the_event_contract(api: Api, db: Any) -> None:
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in SCHEMAS.values()
    )
    created = await api.create()
    path = f"/v1/schedules/{created['id']}"
    await api.call("PATCH", path, json_body={"cron": "0 * * * *"})
    await api.call("PATCH", path, json_body={"paused": True})
    await api.call("POST", f"{path}/resume")
    await api.call("POST", f"{path}/pause")
    await api.call("DELETE", path)
    events = db.read_now(list_events, tenant_id=api.tenant_id)
    assert [(e.type.value, e.data["version"]) for e in events] == [
        ("schedule.created", 1),
        ("schedule.updated", 2),
        ("schedule.updated", 3),
        ("schedule.paused", 3),
        ("schedule.resumed", 4),
        ("schedule.paused", 5),
        ("schedule.deleted", 6),
    ]
    for e in events:
        wire = render_event(e)
        assert wire["actor"] == {"kind": "api_key", "id": api_key_id(db, api)}
        Draft202012Validator(SCHEMAS[e.type.value], registry=registry).validate(wire)


async def test_a_replayed_create_does_not_recheck_the_destination(
    api: Api, dns: dict[str, Any]
) -> None:
    headers = {"Idempotency-Key": "dns-flake"}
    document = schedule_json(target_url="https://hooks.example.com/x")
    first = await api.call("POST", "/v1/schedules", json_body=document, headers=headers)
    dns.clear()  # the host stops resolving
    again = await api.call("POST", "/v1/schedules", json_body=document, headers=headers)
    fresh = await api.call("POST", "/v1/schedules", json_body=document)
    assert (first.status, again.status, fresh.status) == (201, 201, 422)
    assert again.body == first.body
    assert again.headers["Idempotent-Replayed"] == "true"


def api_key_id(db: Any, api: Api) -> str:
    (key,) = db.read_now(list_api_keys, tenant_id=api.tenant_id)
    return str(key.id)
