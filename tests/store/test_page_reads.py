"""The reads a page makes in one snapshot (``store.usecases.pages``, ``store.runs.
run_with_attempts``, ``store.reproduce.probe_inputs``, ``store.invitations.tenant_people``):
what each returns, and that another tenant's or a deleted record is NotFound like a
missing one."""

from __future__ import annotations

import pytest

from appliance.core.events import Actor
from appliance.errors import NotFound
from appliance.store import overview
from appliance.store.infra.database import Database
from appliance.store.invitations import invite_user, tenant_people
from appliance.store.pauses import pause_schedule
from appliance.store.reproduce import probe_inputs
from appliance.store.runs import run_with_attempts
from appliance.store.schedules import delete_schedule
from appliance.store.tenants import create_tenant
from appliance.store.usecases.manual import trigger_schedule
from appliance.store.usecases.pages import (
    dashboard,
    run_page,
    schedule_list,
    schedule_page,
    schedule_runs,
)
from appliance.store.users import Role
from tests.store.conftest import T0, MakeSchedule

OWNER = Actor.operator()


@pytest.fixture
def other(db: Database) -> str:
    return db.write_now(create_tenant, name="globex", now=T0).tenant_id


def trigger(db: Database, tenant: str, schedule_id: str, now: int = T0) -> str:
    run, _ = db.write_now(trigger_schedule, tenant_id=tenant, schedule_id=schedule_id, now=now)
    return run.id


def test_a_run_reads_with_its_attempts_and_only_for_its_tenant(
    db: Database, tenant: str, other: str, make_schedule: MakeSchedule
) -> None:
    run_id = trigger(db, tenant, make_schedule())
    run, attempts = db.read_now(run_with_attempts, tenant_id=tenant, run_id=run_id)
    assert (run.id, attempts) == (run_id, [])
    for tenant_id, rid in ((other, run_id), (tenant, "run_missing")):
        with pytest.raises(NotFound):
            db.read_now(run_with_attempts, tenant_id=tenant_id, run_id=rid)


def test_a_run_page_shows_its_schedules_zone_then_utc_once_deleted(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    schedule_id = make_schedule(timezone="Europe/Paris")
    run_id = trigger(db, tenant, schedule_id)
    assert db.read_now(run_page, tenant_id=tenant, run_id=run_id).zone == "Europe/Paris"
    db.write_now(delete_schedule, tenant_id=tenant, schedule_id=schedule_id, now=T0 + 1)
    shown = db.read_now(run_page, tenant_id=tenant, run_id=run_id)
    assert (shown.run.id, shown.zone) == (run_id, "UTC")


def test_a_schedules_runs_are_not_found_for_a_deleted_or_foreign_schedule(
    db: Database, tenant: str, other: str, make_schedule: MakeSchedule
) -> None:
    schedule_id = make_schedule()
    first, second = trigger(db, tenant, schedule_id), trigger(db, tenant, schedule_id, T0 + 1000)
    runs = db.read_now(schedule_runs, tenant_id=tenant, schedule_id=schedule_id, limit=10)
    assert [r.id for r in runs] == [second, first]
    with pytest.raises(NotFound):
        db.read_now(schedule_runs, tenant_id=other, schedule_id=schedule_id, limit=10)
    db.write_now(delete_schedule, tenant_id=tenant, schedule_id=schedule_id, now=T0 + 2000)
    with pytest.raises(NotFound):  # its runs outlive it, but the schedule is gone
        db.read_now(schedule_runs, tenant_id=tenant, schedule_id=schedule_id, limit=10)


def test_a_schedule_page_carries_its_pause_note_only_while_paused(
    db: Database, tenant: str, other: str, make_schedule: MakeSchedule
) -> None:
    schedule_id = make_schedule()
    run_id = trigger(db, tenant, schedule_id)
    shown = db.read_now(schedule_page, tenant_id=tenant, schedule_id=schedule_id, runs=5)
    assert ([r.id for r in shown.runs], shown.paused_note) == ([run_id], None)
    db.write_now(
        pause_schedule, tenant_id=tenant, schedule_id=schedule_id, now=T0 + 1, actor=OWNER,
        note="migrating the receiver",
    )  # fmt: skip
    shown = db.read_now(schedule_page, tenant_id=tenant, schedule_id=schedule_id, runs=5)
    assert shown.schedule.spec.paused and shown.paused_note == "migrating the receiver"
    with pytest.raises(NotFound):
        db.read_now(schedule_page, tenant_id=other, schedule_id=schedule_id, runs=5)


def test_the_schedule_list_pairs_each_schedule_with_its_last_outcome(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    ids = sorted(make_schedule() for _ in range(3))
    rows = db.read_now(
        schedule_list, tenant_id=tenant, status=overview.Status.ANY, name_contains="", limit=2
    )
    assert [(s.id, last) for s, last in rows] == [(ids[0], None), (ids[1], None)]
    rest = db.read_now(
        schedule_list, tenant_id=tenant, status=overview.Status.ANY, name_contains="", limit=2,
        after_id=ids[1],
    )  # fmt: skip
    assert [s.id for s, _ in rest] == [ids[2]]


def test_the_dashboard_reads_counts_soonest_and_attention_together(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    make_schedule(next_fire_at=T0 + 60_000)
    soon = make_schedule(next_fire_at=T0 + 1000)
    make_schedule(paused=True)
    shown = db.read_now(dashboard, tenant_id=tenant, now=T0, soonest=1, attention=10)
    assert [s.id for s in shown.soonest] == [soon]
    assert (shown.counts.due_24h, shown.counts.paused, shown.attention) == (2, 1, [])


def test_a_probe_reads_the_schedule_and_the_secrets_active_now(
    db: Database, tenant: str, other: str, make_schedule: MakeSchedule
) -> None:
    schedule_id = make_schedule()
    schedule, secrets = db.read_now(probe_inputs, tenant_id=tenant, schedule_id=schedule_id, now=T0)
    assert schedule.id == schedule_id and len(secrets) == 1  # the tenant's first secret
    with pytest.raises(NotFound):
        db.read_now(probe_inputs, tenant_id=other, schedule_id=schedule_id, now=T0)


def test_a_tenants_people_are_its_users_and_pending_invitations(
    db: Database, tenant: str, other: str
) -> None:
    db.write_now(
        invite_user, tenant=tenant, email="Ann@Example.com", role=Role.EDITOR, now=T0,
        actor=OWNER,
    )  # fmt: skip
    people = db.read_now(tenant_people, tenant_id=tenant, now=T0 + 1)
    assert (people.users, [i.email for i in people.invited]) == ([], ["ann@example.com"])
    assert db.read_now(tenant_people, tenant_id=other, now=T0 + 1).invited == []
    later = db.read_now(tenant_people, tenant_id=tenant, now=T0 + 3_600_000)
    assert later.invited == []  # the link expired after an hour
