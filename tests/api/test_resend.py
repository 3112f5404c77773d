"""``POST /v1/runs/{id}/resend``: ``same`` is the replay, ``new`` a copy under a fresh key
that is its own run, traceable to the original, at a second no occurrence can claim."""

from __future__ import annotations

from typing import Any

from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import format_scheduled_for
from tests.api.conftest import START, Api, FakeClock, Nudges, deliver_due

RESEND = "/v1/runs/{}/resend"
SECOND = START - START % 1000  # 10:00:00, the test app's current second


async def delivered_trigger(api: Api, db: Any, clock: FakeClock, **schedule: Any) -> dict[str, Any]:
    """A schedule's manual run, delivered once (200)."""
    created = await api.create(**schedule)
    triggered = (await api.call("POST", f"/v1/schedules/{created['id']}/trigger")).body
    assert deliver_due(db, now=clock.now) == [triggered["id"]]
    return (await api.call("GET", f"/v1/runs/{triggered['id']}")).body  # type: ignore[no-any-return]


async def test_resend_same_is_the_replay(api: Api, db: Any, clock: FakeClock) -> None:
    original = await delivered_trigger(api, db, clock)
    clock.advance(60_000)
    reply = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "same"})
    assert reply.status == 200
    again = reply.body
    assert (again["id"], again["idempotency_key"]) == (original["id"], original["idempotency_key"])
    assert (again["state"], again["due_at"], again["resend_of"]) == (
        "pending",
        "2026-03-02T10:01:00.400Z",
        None,
    )
    assert [a["attempt"] for a in again["attempts"]] == [1]
    # Open again, so a second one is refused exactly as the replay refuses it.
    same = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "same"})
    replay = await api.call("POST", f"/v1/runs/{original['id']}/replay")
    assert same.status == replay.status == 409
    assert same.body["detail"] == replay.body["detail"]


async def test_resend_new_is_a_copy_under_a_fresh_key(
    api: Api, db: Any, clock: FakeClock, nudges: Nudges
) -> None:
    original = await delivered_trigger(api, db, clock)
    clock.advance(2_000)  # 10:00:02.400
    reply = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "new"})
    assert reply.status == 201, reply.body
    copy = reply.body
    # 10:00:01 is free: not a */5 minute occurrence, no row of the schedule.
    slot = format_scheduled_for(SECOND + 1000)
    schedule_id = original["schedule_id"]
    assert copy["scheduled_for"] == slot
    assert copy["id"] == run_id(schedule_id, slot) != original["id"]
    assert copy["idempotency_key"] == idempotency_key(schedule_id, slot)
    assert copy["idempotency_key"] != original["idempotency_key"]
    assert (copy["resend_of"], copy["state"], copy["trigger"]) == (
        original["id"],
        "pending",
        "manual",
    )
    assert (copy["due_at"], copy["attempt"], copy["attempts"]) == (
        "2026-03-02T10:00:02.400Z",
        0,
        [],
    )
    assert reply.headers["Location"] == f"/v1/runs/{copy['id']}"
    assert nudges.count == 3  # create, trigger, resend
    # The original is untouched; both are listed, each its own run.
    assert (await api.call("GET", f"/v1/runs/{original['id']}")).body == original
    runs = (await api.call("GET", f"/v1/schedules/{schedule_id}/runs")).body["items"]
    assert [r["id"] for r in runs] == [copy["id"], original["id"]]
    (event,) = [
        e for e in (await api.call("GET", "/v1/events")).body["items"]
        if e["type"] == "schedule.run.resent"
    ]  # fmt: skip
    assert (event["run_id"], event["schedule_id"]) == (copy["id"], schedule_id)
    assert event["actor"]["kind"] == "api_key"
    assert event["data"] == {
        "scheduled_for": slot,
        "idempotency_key": copy["idempotency_key"],
        "resend_of": original["id"],
        "original_scheduled_for": original["scheduled_for"],
        "original_idempotency_key": original["idempotency_key"],
    }
    # Delivered like any run; its attempts are its own.
    assert deliver_due(db, now=clock.now) == [copy["id"]]
    assert (await api.call("GET", f"/v1/runs/{copy['id']}")).body["state"] == "succeeded"


async def test_a_double_click_is_one_copy_and_the_next_second_another(
    api: Api, db: Any, clock: FakeClock
) -> None:
    original = await delivered_trigger(api, db, clock)
    clock.advance(5_000)  # 10:00:05.400
    first = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "new"})
    clock.advance(500)  # 10:00:05.900, the same second
    second = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "new"})
    assert (first.status, second.status) == (201, 200)
    assert second.body["id"] == first.body["id"]
    clock.advance(100)  # 10:00:06.000
    third = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "new"})
    assert third.status == 201
    # Each copy takes the latest free second before its own: 10:00:04, then 10:00:05.
    assert [first.body["scheduled_for"], third.body["scheduled_for"]] == [
        "2026-03-02T10:00:04Z",
        "2026-03-02T10:00:05Z",
    ]


async def test_a_copy_never_takes_an_occurrences_second(
    api: Api, db: Any, clock: FakeClock
) -> None:
    # Every 2 s at odd seconds: 09:59:59 and 10:00:01 are occurrences, 10:00:00 has the
    # trigger's row, so from 10:00:02 the copy takes 09:59:58.
    original = await delivered_trigger(
        api, db, clock, cron=..., every="2s", start_at="2026-03-02T09:00:01Z"
    )
    clock.advance(2_000)
    reply = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "new"})
    assert reply.status == 201, reply.body
    assert original["scheduled_for"] == "2026-03-02T10:00:00Z"
    assert reply.body["scheduled_for"] == "2026-03-02T09:59:58Z"


async def test_a_schedule_firing_every_second_has_no_second_for_a_copy(
    api: Api, db: Any, clock: FakeClock
) -> None:
    original = await delivered_trigger(
        api, db, clock, cron=..., every="1s", start_at="2026-03-02T08:00:00Z"
    )
    reply = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "new"})
    assert reply.status == 409
    assert '{"key": "same"}' in reply.body["detail"]
    same = await api.call("POST", RESEND.format(original["id"]), json_body={"key": "same"})
    assert same.status == 200


async def test_a_run_of_a_deleted_schedule_is_not_resent(
    api: Api, db: Any, clock: FakeClock
) -> None:
    original = await delivered_trigger(api, db, clock)
    assert (await api.call("DELETE", f"/v1/schedules/{original['schedule_id']}")).status == 204
    for key in ("same", "new"):
        reply = await api.call("POST", RESEND.format(original["id"]), json_body={"key": key})
        assert reply.status == 409, key


async def test_bad_bodies_are_422_naming_the_field_and_change_nothing(
    api: Api, db: Any, clock: FakeClock
) -> None:
    original = await delivered_trigger(api, db, clock)
    path = RESEND.format(original["id"])
    for body, fields in [
        ({}, ["key"]),
        ({"key": "again"}, ["key"]),
        ({"key": "new", "when": "now"}, ["when"]),
        ([], ["$"]),
    ]:
        reply = await api.call("POST", path, json_body=body)
        assert (reply.status, reply.fields) == (422, fields), body
    assert (await api.call("GET", f"/v1/runs/{original['id']}")).body == original
    runs = (await api.call("GET", f"/v1/schedules/{original['schedule_id']}/runs")).body
    assert [r["id"] for r in runs["items"]] == [original["id"]]


async def test_another_tenants_run_is_404_and_a_read_key_403(
    api: Api, other: Api, db: Any, clock: FakeClock
) -> None:
    original = await delivered_trigger(api, db, clock)
    for key in ("same", "new"):
        reply = await other.call("POST", RESEND.format(original["id"]), json_body={"key": key})
        assert reply.status == 404
    reader = (await api.call("POST", "/v1/keys", json_body={"name": "r", "scope": "read"})).body
    read_only = Api(app=api.app, key=reader["api_key"])
    reply = await read_only.call("POST", RESEND.format(original["id"]), json_body={"key": "new"})
    assert reply.status == 403
    assert (await api.call("GET", f"/v1/runs/{original['id']}")).body == original
