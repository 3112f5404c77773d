"""Retention: finished history past the period goes; open runs and the horizon stay."""

from __future__ import annotations

import apsw
import pytest

from appliance.core.events import EventType
from appliance.core.runs import RunState
from appliance.store.completions import complete_run
from appliance.store.events import append_event
from appliance.store.infra.database import Database
from appliance.store.retention import DAY_MS, MIN_RETENTION_MS, prune
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.store.conftest import T0, MakeSchedule
from tests.store.test_runs import add_run, claim, ok, schedule_value

RETENTION = 30 * DAY_MS


def count(conn: apsw.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def finish(db: Database, owner: str, at: int) -> None:
    for run in claim(db, owner, at):
        assert db.write_now(complete_run, run=run, completion=ok(), now=at)


def test_old_finished_history_goes_and_open_runs_stay(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    schedule = schedule_value(make_schedule(next_fire_at=None), tenant)
    db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    finish(db, "inc_a", T0 + 1_000)  # succeeded at T0 + 1 s, with an attempt and an event
    never_due = T0 + 400 * DAY_MS
    db.write_now(add_run, schedule=schedule, scheduled_for=T0 + 60_000, due_at=never_due)
    db.write_now(add_run, schedule=schedule, scheduled_for=T0 + 120_000, state=RunState.MISSED)
    late = T0 + RETENTION + 10_000
    db.write_now(add_run, schedule=schedule, scheduled_for=late - 5_000)
    finish(db, "inc_b", late)  # finished inside the period: stays
    db.write_now(append_event, tenant_id=tenant, type=EventType.SCHEDULE_CREATED, now=late, data={})
    before = db.read_now(count, "events")

    pruned = db.write_now(prune, now=late + 1_000, retention_ms=RETENTION, limit=100)

    assert (pruned.runs, pruned.attempts) == (2, 1)  # the old success and the old missed row
    states = db.read_now(lambda c: sorted(s for (s,) in c.execute("SELECT state FROM job_runs")))
    assert states == ["pending", "succeeded"]
    assert db.read_now(count, "attempts") == 1
    assert db.read_now(count, "events") == before - pruned.events and pruned.events >= 1
    assert pruned.bodies == 0  # still used by the runs that stay
    assert db.read_now(count, "bodies") == 1


def test_a_batch_is_bounded_and_the_horizon_enforced(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    schedule = schedule_value(make_schedule(next_fire_at=None), tenant)
    for minute in range(5):
        db.write_now(
            add_run, schedule=schedule, scheduled_for=T0 + minute * 60_000, state=RunState.MISSED
        )
    now = T0 + RETENTION + 1
    assert db.write_now(prune, now=now, retention_ms=RETENTION, limit=2).runs == 2
    assert db.write_now(prune, now=now, retention_ms=RETENTION, limit=10).runs == 3
    assert db.write_now(prune, now=now, retention_ms=RETENTION, limit=10).bodies == 0
    with pytest.raises(ValueError, match="dedupe horizon"):
        db.write_now(prune, now=now, retention_ms=MIN_RETENTION_MS - 1, limit=10)


def test_re_planning_after_pruning_makes_no_second_row(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    """The cursor never moves back, so a pruned occurrence is never planned again."""
    make_schedule(cron="0 * * * *")  # hourly, cursor at T0
    config = PlannerConfig(max_catchup=10_000)
    first = T0 + 35 * DAY_MS
    db.write_now(plan_once, now=first, config=config)  # 35 days of occurrences, mostly missed
    planned = db.read_now(lambda c: c.execute("SELECT max(scheduled_for) FROM job_runs").fetchone())
    missed = db.read_now(
        lambda c: c.execute("SELECT count(*) FROM job_runs WHERE state = 'missed'").fetchone()
    )
    later = first + RETENTION + DAY_MS
    pruned = db.write_now(prune, now=later, retention_ms=RETENTION, limit=100_000)
    assert pruned.runs == missed[0] == 35 * 24 - 1  # the two inside the catch-up window are open
    db.write_now(plan_once, now=later, config=config)
    oldest = db.read_now(lambda c: c.execute("SELECT min(scheduled_for) FROM job_runs").fetchone())
    assert oldest[0] >= planned[0] - 3_600_000  # the two open rows; nothing pruned came back
    assert db.read_now(count, "job_runs") == 2 + 24 * 31  # the open two + (first, later]
