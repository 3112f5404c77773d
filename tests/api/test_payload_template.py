"""``payload_template`` through the API: stored, shown, switched by PATCH, refused with a
422 naming the unknown variable; and the runs it makes (docs/schedules.md, "Payload
variables")."""

from __future__ import annotations

import json

from appliance.store.infra.database import Database
from appliance.store.usecases.manual import trigger_schedule
from tests.api.conftest import Api, FakeClock, load_schedule, schedule_json

TEMPLATE = {
    "report": "nightly",
    "for": "{{scheduled_for}}",
    "since": "{{window_start}}",
    "title": 'run "{{run_id}}" of {{schedule_id}}',
}


async def test_a_template_is_stored_and_shown_instead_of_a_payload(api: Api, db: Database) -> None:
    created = await api.create(payload=..., payload_template=TEMPLATE)
    assert created["payload_template"] == TEMPLATE
    assert "payload" not in created
    stored = load_schedule(db, api.tenant_id, created["id"]).spec
    assert stored.templated and json.loads(stored.body) == TEMPLATE


async def test_a_manual_run_sends_the_rendered_template(
    api: Api, db: Database, clock: FakeClock
) -> None:
    created = await api.create(payload=..., payload_template=TEMPLATE, cron="0 * * * *")
    run, _ = db.write_now(
        trigger_schedule, tenant_id=api.tenant_id, schedule_id=created["id"], now=clock.now_ms()
    )
    body = json.loads(
        db.read_now(
            lambda conn: conn.execute(
                "SELECT b.body FROM job_runs r JOIN bodies b ON b.digest = r.body_digest"
                " WHERE r.id = ?",
                (run.id,),
            ).fetchone()[0]
        )
    )
    # The clock is 2026-03-02T10:00:00.400Z: the trigger's occurrence is 10:00:00, the
    # hourly timing's previous occurrence 09:00:00.
    assert body == {
        "report": "nightly",
        "for": "2026-03-02T10:00:00Z",
        "since": "2026-03-02T09:00:00Z",
        "title": f'run "{run.id}" of {created["id"]}',
    }


async def test_an_unknown_variable_is_a_422_naming_it_and_nothing_is_stored(api: Api) -> None:
    template = {"items": [{"at": "{{scheduled_for}}"}, {"at": "{{sheduled_for}}"}]}
    reply = await api.call(
        "POST", "/v1/schedules", json_body=schedule_json(payload=..., payload_template=template)
    )
    assert reply.status == 422, reply.body
    (error,) = reply.body["errors"]
    assert error["field"] == "payload_template.items[1].at"
    assert "{{sheduled_for}}" in error["message"]
    assert "{{scheduled_for}}" in error["message"]  # the names it could have meant
    assert (await api.call("GET", "/v1/schedules")).body["items"] == []


async def test_payload_and_payload_template_exclude_each_other(api: Api) -> None:
    reply = await api.call(
        "POST", "/v1/schedules", json_body=schedule_json(payload_template={"a": "{{run_id}}"})
    )
    assert reply.status == 422
    assert reply.fields == ["payload_template"]
    assert "keep one" in reply.body["errors"][0]["message"]


async def test_patch_switches_between_payload_and_template(api: Api, db: Database) -> None:
    created = await api.create()
    path = f"/v1/schedules/{created['id']}"
    reply = await api.call("PATCH", path, json_body={"payload_template": {"t": "{{window_end}}"}})
    assert reply.status == 200, reply.body
    assert reply.body["payload_template"] == {"t": "{{window_end}}"}
    assert "payload" not in reply.body
    assert load_schedule(db, api.tenant_id, created["id"]).spec.templated
    bad = await api.call("PATCH", path, json_body={"payload_template": {"t": "{{nope}}"}})
    assert bad.status == 422 and bad.fields == ["payload_template.t"]
    reply = await api.call("PATCH", path, json_body={"payload": {"plain": "{{window_end}}"}})
    assert reply.status == 200, reply.body
    assert reply.body["payload"] == {"plain": "{{window_end}}"}  # a payload is never rendered
    assert "payload_template" not in reply.body
    assert not load_schedule(db, api.tenant_id, created["id"]).spec.templated
