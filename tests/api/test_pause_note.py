"""``POST /v1/schedules/{id}/pause`` with its optional ``{"note": …}`` body: the note is
kept in the ``schedule.paused`` event (the same store function the web UI's pause form
calls); a bad note is a 422 naming ``note`` and nothing is paused."""

from __future__ import annotations

from typing import Any

import pytest

from appliance.core.events import EventType
from appliance.store.events import list_events
from appliance.store.pauses import MAX_NOTE_CHARS, pause_note
from tests.api.conftest import Api, load_schedule


def paused_events(db: Any, api: Api) -> list[Any]:
    events = db.read_now(list_events, tenant_id=api.tenant_id)
    return [e for e in events if e.type is EventType.SCHEDULE_PAUSED]


async def test_a_pause_note_is_trimmed_and_kept_in_the_paused_event(api: Api, db: Any) -> None:
    created = await api.create()
    path = f"/v1/schedules/{created['id']}/pause"
    paused = await api.call("POST", path, json_body={"note": "  database move until Friday \n"})
    assert paused.status == 200 and paused.body["paused"] is True
    (event,) = paused_events(db, api)
    assert event.data == {"version": 2, "note": "database move until Friday"}
    note = db.read_now(pause_note, tenant_id=api.tenant_id, schedule_id=created["id"])
    assert note == "database move until Friday"
    again = await api.call("POST", path, json_body={"note": "another reason"})
    assert again.body["version"] == 2  # pausing twice changes nothing, the note stays
    assert len(paused_events(db, api)) == 1
    await api.call("POST", f"/v1/schedules/{created['id']}/resume")
    assert db.read_now(pause_note, tenant_id=api.tenant_id, schedule_id=created["id"]) is None


@pytest.mark.parametrize(
    "body", [None, {}, {"note": None}, {"note": "   "}], ids=["none", "{}", "null", "blank"]
)
async def test_a_pause_without_a_note_stays_valid(api: Api, db: Any, body: Any) -> None:
    created = await api.create()
    paused = await api.call("POST", f"/v1/schedules/{created['id']}/pause", json_body=body)
    assert paused.status == 200 and paused.body["paused"] is True
    (event,) = paused_events(db, api)
    assert event.data == {"version": 2}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"note": "x" * (MAX_NOTE_CHARS + 1)}, "note"),
        ({"note": 42}, "note"),
        ({"note": ["why"]}, "note"),
        ({"reason": "why"}, "reason"),
        (["why"], "body"),
    ],
    ids=["too long", "number", "list", "unknown field", "not an object"],
)
async def test_a_bad_pause_body_is_a_422_naming_the_field_and_nothing_is_paused(
    api: Api, db: Any, body: Any, field: str
) -> None:
    created = await api.create()
    refused = await api.call("POST", f"/v1/schedules/{created['id']}/pause", json_body=body)
    assert refused.status == 422, refused.body
    assert [e["field"] for e in refused.body["errors"]] == [field]
    schedule = load_schedule(db, api.tenant_id, created["id"])
    assert not schedule.spec.paused and schedule.version == 1
    assert paused_events(db, api) == []


async def test_a_note_of_exactly_the_limit_after_trimming_is_kept(api: Api, db: Any) -> None:
    created = await api.create()
    note = "n" * MAX_NOTE_CHARS
    paused = await api.call(
        "POST", f"/v1/schedules/{created['id']}/pause", json_body={"note": f" {note} "}
    )
    assert paused.status == 200
    assert paused_events(db, api)[0].data["note"] == note


async def test_a_pause_body_needs_json(api: Api) -> None:
    created = await api.create()
    refused = await api.call(
        "POST",
        f"/v1/schedules/{created['id']}/pause",
        data="note=why",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert refused.status == 415
