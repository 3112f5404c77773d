"""Bulk replay in the store: paced reopening, and the proof that a large replay does not
starve the same tenant's scheduled work (the claim takes a tenant's runs earliest
``due_at`` first, so pacing the replayed runs' ``due_at`` keeps scheduled runs on time)."""

from __future__ import annotations

import apsw
import pytest

from appliance.core.runs import RunState
from appliance.core.schedules import Schedule
from appliance.errors import ValidationError
from appliance.store.claims import claim_runs
from appliance.store.completions import complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.run_search import RunFilter, search_runs
from appliance.store.usecases import manual
from appliance.store.usecases.manual import replay_matching, replay_runs
from tests.store.conftest import T0, MakeSchedule
from tests.store.test_runs import add_run, ok, schedule_value

S = RunState
FAILED = RunFilter(states=frozenset({S.FAILED}))
TICK = 100  # ms between dispatcher claims in the simulation
CLAIM_LIMIT = 8  # runs per claim: 80/s, above 50/s of replays plus the schedule's 1/s
RATE = 50  # replay_rate_per_second's default


def failed_runs(conn: apsw.Connection, schedule: Schedule, count: int, *, at: int) -> list[str]:
    """``count`` runs of ``schedule`` that failed at ``at``, one a second before it."""
    ids = [
        add_run(conn, schedule=schedule, scheduled_for=at - (count - n) * 1000)
        for n in range(count)
    ]
    conn.execute(
        "UPDATE job_runs SET state = 'failed', attempt = 1, last_status = 500,"
        " finished_at = ?, updated_at = ? WHERE schedule_id = ?",
        (at, at, schedule.id),
    )
    return ids


@pytest.fixture
def two(make_schedule: MakeSchedule, tenant: str) -> tuple[Schedule, Schedule]:
    return schedule_value(make_schedule(), tenant), schedule_value(make_schedule(), tenant)


def test_a_2000_run_replay_drains_while_every_second_runs_stay_on_time(
    db: Database, tenant: str, two: tuple[Schedule, Schedule]
) -> None:
    backlog, every_second = two
    db.write_now(failed_runs, backlog, 2000, at=T0)
    drain_s = 2000 // RATE + 5
    for second in range(1, drain_s + 1):
        db.write_now(add_run, schedule=every_second, scheduled_for=T0 + second * 1000)
    count = db.write_now(
        replay_matching,
        tenant_id=tenant,
        where=FAILED,
        as_of=T0,
        now=T0,
        rate_per_second=RATE,
    )
    assert (count.matched, count.replayed) == (2000, 2000)
    owner = db.write_now(register_incarnation, pid=1, now=T0)
    lateness: list[int] = []
    replayed_done = 0

    def dispatch(conn: apsw.Connection, *, now: int) -> None:
        """One claim and the instant success of everything claimed (a fast receiver)."""
        nonlocal replayed_done
        batch = claim_runs(conn, owner=owner, now=now, lease_ms=30_000, limit=CLAIM_LIMIT)
        for run in batch.runs:
            if run.schedule_id == every_second.id:
                lateness.append(now - run.scheduled_for)
            else:
                replayed_done += 1
            assert complete_run(conn, run=run, completion=ok(), now=now)

    for now in range(T0, T0 + drain_s * 1000 + 1, TICK):
        db.write_now(dispatch, now=now)
    assert replayed_done == 2000  # the replay drained
    assert len(lateness) == drain_s  # every scheduled run was delivered,
    assert max(lateness) < TICK  # each at the first claim after its due time


def test_replays_are_paced_oldest_first_after_those_still_waiting(
    db: Database, tenant: str, two: tuple[Schedule, Schedule]
) -> None:
    first, second = two
    old = db.write_now(failed_runs, first, 3, at=T0)
    new = db.write_now(failed_runs, second, 2, at=T0)
    db.write_now(replay_runs, tenant_id=tenant, run_ids=old, now=T0, rate_per_second=10)
    db.write_now(replay_runs, tenant_id=tenant, run_ids=new, now=T0 + 50, rate_per_second=10)
    pending = db.read_now(
        search_runs, tenant_id=tenant, where=RunFilter(states=frozenset({S.PENDING})), limit=10
    )
    due = {run.id: run.due_at for run in pending}
    assert [due[rid] for rid in old] == [T0, T0 + 100, T0 + 200]
    assert [due[rid] for rid in new] == [T0 + 300, T0 + 400]  # after the first request's


def test_a_filter_matching_too_many_runs_is_refused_and_replays_nothing(
    db: Database, tenant: str, two: tuple[Schedule, Schedule], monkeypatch: pytest.MonkeyPatch
) -> None:
    db.write_now(failed_runs, two[0], 4, at=T0)
    monkeypatch.setattr(manual, "MAX_REPLAY_MATCH", 3)
    with pytest.raises(ValidationError) as raised:
        db.write_now(
            replay_matching, tenant_id=tenant, where=FAILED, as_of=T0, now=T0, rate_per_second=50
        )
    assert raised.value.errors[0].field == "filter"
    assert len(db.read_now(search_runs, tenant_id=tenant, where=FAILED, limit=10)) == 4


def test_runs_of_a_deleted_schedule_are_counted_not_replayed(
    db: Database, tenant: str, two: tuple[Schedule, Schedule]
) -> None:
    live, deleted = two
    db.write_now(failed_runs, live, 2, at=T0)
    gone = db.write_now(failed_runs, deleted, 1, at=T0)
    db.write_now(
        lambda conn: conn.execute(
            "UPDATE schedules SET deleted_at = ? WHERE id = ?", (T0, deleted.id)
        )
    )
    count = db.write_now(
        replay_matching, tenant_id=tenant, where=FAILED, as_of=T0, now=T0, rate_per_second=50
    )
    assert (count.matched, count.replayed, count.schedule_deleted) == (3, 2, 1)
    with pytest.raises(manual.Conflict, match=gone[0]):
        db.write_now(replay_runs, tenant_id=tenant, run_ids=gone, now=T0, rate_per_second=50)
