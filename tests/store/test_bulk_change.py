"""``store.usecases.bulk_change.change_schedules``: every selected schedule changes, by the
single change's own function, or none does; and ``store.request_keys.
create_schedules_once``: a batch under an ``Idempotency-Key`` is created once."""

from __future__ import annotations

import json

import pytest

from appliance.core.addresses import AddressPolicy
from appliance.core.events import Actor
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import Schedule
from appliance.errors import NotFound
from appliance.store.infra.database import Database
from appliance.store.pauses import pause_note
from appliance.store.request_keys import StoredResponse, create_schedules_once
from appliance.store.run_search import RunFilter, search_runs
from appliance.store.schedules import count_schedules, get_schedule
from appliance.store.tenants import create_tenant
from appliance.store.usecases.bulk_change import Change, change_schedules
from tests.store.conftest import T0, MakeSchedule

ACTOR = Actor.operator()


def paused(db: Database, tenant: str, ids: list[str]) -> list[bool]:
    found = [db.read_now(get_schedule, tenant_id=tenant, schedule_id=i) for i in ids]
    return [s is not None and s.spec.paused for s in found]


def test_a_pause_of_the_selected_schedules_pauses_each_with_the_note(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    ids = [make_schedule(), make_schedule()]
    db.write_now(
        change_schedules, tenant_id=tenant, schedule_ids=ids, change=Change.PAUSE, now=T0,
        actor=ACTOR, note="maintenance",
    )  # fmt: skip
    assert paused(db, tenant, ids) == [True, True]
    notes = [db.read_now(pause_note, tenant_id=tenant, schedule_id=i) for i in ids]
    assert notes == ["maintenance", "maintenance"]
    db.write_now(
        change_schedules, tenant_id=tenant, schedule_ids=ids, change=Change.RESUME, now=T0 + 1,
        actor=ACTOR,
    )  # fmt: skip
    assert paused(db, tenant, ids) == [False, False]


def test_run_now_of_the_selected_schedules_triggers_one_run_each(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    ids = [make_schedule(), make_schedule()]
    db.write_now(
        change_schedules, tenant_id=tenant, schedule_ids=ids, change=Change.RUN, now=T0,
        actor=ACTOR,
    )  # fmt: skip
    runs = db.read_now(search_runs, tenant_id=tenant, where=RunFilter(), limit=10)
    assert sorted(r.schedule_id for r in runs) == sorted(ids)


def test_a_foreign_schedule_among_the_selected_changes_none(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    other = db.write_now(create_tenant, name="globex", now=T0).tenant_id
    mine = make_schedule()
    with pytest.raises(NotFound):
        db.write_now(
            change_schedules, tenant_id=other, schedule_ids=[mine], change=Change.PAUSE,
            now=T0, actor=ACTOR,
        )  # fmt: skip
    first = make_schedule()
    with pytest.raises(NotFound):
        db.write_now(
            change_schedules, tenant_id=tenant, schedule_ids=[first, "sch_missing"],
            change=Change.PAUSE, now=T0, actor=ACTOR,
        )  # fmt: skip
    assert paused(db, tenant, [mine, first]) == [False, False]


def render(created: list[Schedule]) -> StoredResponse:
    return StoredResponse(status=201, body=json.dumps([s.id for s in created]))


def test_a_batch_under_a_request_key_is_created_once(db: Database, tenant: str) -> None:
    specs = [
        parse_schedule(
            {
                "name": f"s{n}",
                "cron": "* * * * *",
                "target_url": "https://hooks.example.com/h",
                "payload": {},
            },
            policy=AddressPolicy(),
        )
        for n in range(3)
    ]
    once = {"tenant_id": tenant, "specs": specs, "request_key": "k1", "request_hash": "h"}
    first, created = db.write_now(create_schedules_once, **once, render=render, now=T0)
    again, created_again = db.write_now(create_schedules_once, **once, render=render, now=T0 + 1)
    assert (created, created_again) == (True, False)
    assert again == first and len(json.loads(first.body)) == 3
    assert db.read_now(count_schedules, tenant_id=tenant) == 3
