"""An edit, pause or delete made while the planner lags behind a schedule (after a forward
clock step, before its next pass) first plans the occurrences already due under the
current spec, as a pass would (``store.schedules.settled``): every occurrence ends as a
run, a ``missed`` row with its event, or a run the pause cancelled — none without a row."""

from __future__ import annotations

import dataclasses

import apsw

from appliance.core.events import EventType
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.pauses import pause_schedule
from appliance.store.schedules import delete_schedule, get_schedule, update_schedule
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.store.conftest import T0, MakeSchedule

MINUTE = 60_000
LATER = T0 + 10 * MINUTE  # the wall clock stepped forward ten minutes; no pass since


def rows(db: Database, sid: str) -> list[tuple[int, str]]:
    def query(conn: apsw.Connection) -> list[tuple[int, str]]:
        return [
            ((int(s) - T0) // MINUTE, str(state))
            for s, state in conn.execute(
                "SELECT scheduled_for, state FROM job_runs WHERE schedule_id = ?"
                " ORDER BY scheduled_for",
                (sid,),
            )
        ]

    return db.read_now(query)


def retime(db: Database, tenant: str, sid: str, cron: str, now: int) -> None:
    current = db.read_now(get_schedule, tenant_id=tenant, schedule_id=sid)
    assert current is not None
    spec = dataclasses.replace(current.spec, cron=cron)
    db.write_now(update_schedule, tenant_id=tenant, schedule_id=sid, spec=spec, now=now)


def missed_events(db: Database, tenant: str) -> int:
    events = db.read_now(
        list_events, tenant_id=tenant, limit=1000, types=frozenset({EventType.RUN_MISSED})
    )
    return len(events)


def test_a_retime_after_a_forward_step_first_plans_what_was_due(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0 + MINUTE)
    retime(db, tenant, sid, "*/5 * * * *", LATER)
    # Catch-up `all`: every minute up to the edit is delivered late, none dropped.
    assert rows(db, sid) == [(m, "pending") for m in range(1, 11)]
    after = db.read_now(get_schedule, tenant_id=tenant, schedule_id=sid)
    assert after is not None and after.next_fire_at == T0 + 15 * MINUTE  # the new spec


def test_settled_occurrences_follow_the_catchup_policy_and_are_announced(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0 + MINUTE, catchup_policy="skip")
    retime(db, tenant, sid, "*/5 * * * *", LATER)
    # Within the 60 s misfire threshold (minutes 9 and 10) on time; older ones skipped.
    assert rows(db, sid) == [(m, "missed") for m in range(1, 9)] + [(9, "pending"), (10, "pending")]
    assert missed_events(db, tenant) == 8


def test_a_pause_after_a_forward_step_leaves_each_due_occurrence_a_row(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0 + MINUTE)
    db.write_now(pause_schedule, tenant_id=tenant, schedule_id=sid, now=LATER)
    assert rows(db, sid) == [(m, "cancelled") for m in range(1, 11)]  # the pause cancels


def test_a_delete_after_a_forward_step_leaves_each_due_occurrence_a_row(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0 + MINUTE, catchup_policy="skip")
    db.write_now(delete_schedule, tenant_id=tenant, schedule_id=sid, now=LATER)
    assert rows(db, sid) == [(m, "missed") for m in range(1, 9)] + [
        (9, "cancelled"),
        (10, "cancelled"),
    ]


def test_an_edit_when_the_planner_is_current_plans_nothing_more(
    db: Database, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule(cron="* * * * *", next_fire_at=T0 + MINUTE)
    while db.write_now(plan_once, now=LATER, config=PlannerConfig()).more:
        pass
    planned = rows(db, sid)
    assert planned[-1] == (10, "pending")  # and the lookahead's 2 s hold no other minute
    retime(db, tenant, sid, "*/5 * * * *", LATER)
    assert rows(db, sid) == planned
