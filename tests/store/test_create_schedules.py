"""``store.schedules.create_schedules``: what it returns is what a read answers (it does not
read its rows back), every kind of spec included; all or none, with the refused item's
``index``; one ``schedule.created`` event per schedule, in order."""

from __future__ import annotations

from typing import Any

import pytest

from appliance.core.addresses import AddressPolicy
from appliance.core.events import Actor
from appliance.core.instants import parse_instant
from appliance.core.schedule_input import parse_schedule
from appliance.errors import ValidationError
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.schedules import count_schedules, create_schedules, get_schedule
from appliance.store.tenants import create_tenant

NOW = parse_instant("2026-03-02T10:00:00.400Z")
URL = "https://hooks.example.com/hook"

SPECS: list[dict[str, Any]] = [
    {"cron": "*/5 * * * *", "payload": {"a": 1}},
    {
        "cron": "30 2 * * *",
        "timezone": "Europe/Berlin",
        "dst": {"gap": "skip", "fold": "both"},
        "jitter_seconds": 45,
        "headers": [["X-Team", "ops"]],
        "retry": {"max_attempts": 4, "retry_on_status": [500, 503]},
        "catchup": {"policy": "all", "window_seconds": 600},
        "overlap": "skip",
        "paused": True,
        "body": "plain text",
        "content_type": "text/plain",
    },
    {"every": "90s", "payload_template": {"at": "{{scheduled_for}}"}},
    {"at": "2026-04-01T00:00:00Z", "payload": [1, 2]},
    {
        "cron": "0 9 * * 1-5",
        "start_at": "2026-03-10T00:00:00Z",
        "end_at": "2027-01-01T00:00:00Z",
        "payload": {},
    },
]


def spec_of(fields: dict[str, Any]) -> Any:
    return parse_schedule({"name": "n", "target_url": URL, **fields}, policy=AddressPolicy())


@pytest.fixture
def tenant_id(db: Database) -> str:
    return db.write_now(create_tenant, name="alpha", now=NOW).tenant_id


def test_what_a_create_returns_is_what_a_read_answers(db: Database, tenant_id: str) -> None:
    actor = Actor.parse("api_key:key_01")
    created = db.write_now(
        create_schedules,
        tenant_id=tenant_id,
        specs=[spec_of(fields) for fields in SPECS],
        now=NOW,
        actor=actor,
    )
    assert [s.id for s in created] == sorted(s.id for s in created)
    for schedule in created:
        stored = db.read_now(get_schedule, tenant_id=tenant_id, schedule_id=schedule.id)
        assert stored == schedule
    events = db.read_now(list_events, tenant_id=tenant_id)
    assert [(e.schedule_id, e.data, e.actor) for e in events] == [
        (s.id, {"version": 1}, actor) for s in created
    ]


def test_one_timing_that_never_fires_refuses_them_all_naming_its_index(
    db: Database, tenant_id: str
) -> None:
    specs = [spec_of(SPECS[0]), spec_of({"at": "2026-03-01T00:00:00Z", "payload": 1})]
    with pytest.raises(ValidationError) as refused:
        db.write_now(create_schedules, tenant_id=tenant_id, specs=specs, now=NOW)
    assert [(e.index, e.field) for e in refused.value.errors] == [(1, "at")]
    assert db.read_now(count_schedules, tenant_id=tenant_id) == 0
    assert db.read_now(list_events, tenant_id=tenant_id) == []
