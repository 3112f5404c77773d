"""The planner's batched statements: the slim due query, one insert for a pass's rows, one
compare-and-set update for its cursors — each with the guarantees of the row-by-row form."""

from __future__ import annotations

import apsw
import pytest

from appliance.core.runs import NewRun, RunState, Trigger, occurrence_run
from appliance.errors import StoreError
from appliance.store.infra.database import Database
from appliance.store.materialise import insert_runs, store_body
from appliance.store.planning import (
    CursorMove,
    advance_cursors,
    due_cursors,
    earliest_cursor,
)
from appliance.store.schedules import get_schedule
from tests.store.conftest import T0, MakeSchedule


def planned(schedule_id: str, tenant: str, at: int, state: RunState, digest: str) -> NewRun:
    return occurrence_run(
        schedule_id=schedule_id,
        tenant_id=tenant,
        schedule_version=1,
        scheduled_for=at,
        due_at=at + 5,
        state=state,
        trigger=Trigger.SCHEDULE,
        body_digest=digest,
        missed_reason="catchup_skip" if state is RunState.MISSED else None,
    )


def stored(db: Database, schedule_id: str) -> list[tuple[object, ...]]:
    def query(conn: apsw.Connection) -> list[tuple[object, ...]]:
        return list(
            conn.execute(
                "SELECT scheduled_for, due_at, state, trigger, created_at, finished_at"
                " FROM job_runs WHERE schedule_id = ? ORDER BY scheduled_for",
                (schedule_id,),
            )
        )

    return db.read_now(query)


def test_due_cursors_read_what_the_schedule_holds(
    db: Database, make_schedule: MakeSchedule
) -> None:
    make_schedule(next_fire_at=T0 + 5_000, catchup_policy="latest", jitter_seconds=9)
    make_schedule(next_fire_at=T0, timezone="Europe/Berlin", catchup_window_seconds=60)
    make_schedule(next_fire_at=T0, paused=True)
    make_schedule(next_fire_at=T0 + 60_000)
    slim = db.read_now(due_cursors, horizon=T0 + 5_000, limit=10)
    assert len(slim) == 2 and slim[1].catchup_policy.value == "latest"
    for due in slim:
        full = db.read_now(get_schedule, tenant_id=due.tenant_id, schedule_id=due.id)
        assert full is not None
        assert tuple(due) == (
            full.id,
            full.tenant_id,
            full.version,
            full.spec.cron,
            full.spec.timezone,
            full.spec.content_type,
            full.spec.body,
            full.spec.jitter_seconds,
            full.spec.catchup_policy,
            full.spec.catchup_window_seconds,
            full.next_fire_at,
            full.spec.at,
            full.spec.every_seconds,
            full.spec.start_at,
            full.spec.end_at,
            full.spec.overlap.value,
            int(full.spec.templated),
            full.spec.dst_gap,
            full.spec.dst_fold,
        )


def test_a_batch_inserts_each_occurrence_once_and_names_only_what_it_created(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    sid = make_schedule(next_fire_at=T0)
    digest = db.write_now(store_body, content_type="application/json", body=b"{}")
    first = [planned(sid, tenant, T0, RunState.PENDING, digest)]
    assert db.write_now(insert_runs, first, now=T0) == {first[0].id}
    # The same occurrence again (already planned, or a racing planner was first) is
    # skipped by the unique index; the new ones are created, a missed one finished now.
    second = [
        planned(sid, tenant, T0, RunState.PENDING, digest),
        planned(sid, tenant, T0 + 60_000, RunState.MISSED, digest),
        planned(sid, tenant, T0 + 120_000, RunState.PENDING, digest),
    ]
    created = db.write_now(insert_runs, second, now=T0 + 1)
    assert created == {second[1].id, second[2].id}
    assert stored(db, sid) == [
        (T0, T0 + 5, "pending", "schedule", T0, None),
        (T0 + 60_000, T0 + 60_005, "missed", "schedule", T0 + 1, T0 + 1),
        (T0 + 120_000, T0 + 120_005, "pending", "schedule", T0 + 1, None),
    ]
    assert db.write_now(insert_runs, [], now=T0) == set()


def test_a_batch_naming_one_occurrence_twice_creates_it_once(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    """Inside one batch the second row conflicts with the first: the change count falls
    short, and the batch is inserted again learning which rows are new."""
    sid = make_schedule(next_fire_at=T0)
    digest = db.write_now(store_body, content_type="application/json", body=b"{}")
    batch = [
        planned(sid, tenant, T0, RunState.PENDING, digest),
        planned(sid, tenant, T0 + 60_000, RunState.PENDING, digest),
        planned(sid, tenant, T0, RunState.PENDING, digest),
    ]
    assert db.write_now(insert_runs, batch, now=T0) == {batch[0].id, batch[1].id}
    assert [row[0] for row in stored(db, sid)] == [T0, T0 + 60_000]


def test_a_batch_that_fails_inserts_nothing(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    sid = make_schedule(next_fire_at=T0)
    digest = db.write_now(store_body, content_type="application/json", body=b"{}")
    batch = [
        planned(sid, tenant, T0, RunState.PENDING, digest),
        planned(sid, tenant, T0 + 60_000, RunState.PENDING, "no-such-body"),  # foreign key
    ]
    with pytest.raises(StoreError, match=r"(?i)foreign key"):  # SQLite and PostgreSQL say it so
        db.write_now(insert_runs, batch, now=T0)
    assert stored(db, sid) == []
    assert db.write_now(insert_runs, batch[:1], now=T0) == {batch[0].id}


def test_a_batch_of_cursor_moves_is_all_or_nothing(
    db: Database, make_schedule: MakeSchedule
) -> None:
    a, b = make_schedule(next_fire_at=T0), make_schedule(next_fire_at=T0)
    db.write_now(advance_cursors, [CursorMove(a, T0, T0 + 60_000), CursorMove(b, T0, None)])
    assert db.read_now(earliest_cursor) == T0 + 60_000
    # b no longer reads T0 (it never fires again): the whole batch is refused, a included.
    with pytest.raises(StoreError, match=f"schedule {b}: cursor moved under"):
        db.write_now(
            advance_cursors,
            [CursorMove(a, T0 + 60_000, T0 + 120_000), CursorMove(b, T0, T0 + 60_000)],
        )
    assert db.read_now(earliest_cursor) == T0 + 60_000
    with pytest.raises(StoreError, match=f"schedule {a}: cursor may not move"):
        db.write_now(advance_cursors, [CursorMove(a, T0 + 60_000, T0 + 60_000)])
    # One schedule listed twice: its second move finds the cursor already moved.
    with pytest.raises(StoreError, match=f"schedule {a}: cursor moved under"):
        db.write_now(
            advance_cursors,
            [CursorMove(a, T0 + 60_000, T0 + 120_000), CursorMove(a, T0 + 60_000, T0 + 180_000)],
        )
    assert db.read_now(earliest_cursor) == T0 + 60_000
    db.write_now(advance_cursors, [])
