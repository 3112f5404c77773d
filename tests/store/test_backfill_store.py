"""Backfill against live planning (docs/schedules.md, "Backfill"), a Hypothesis property:
whatever the interleaving of planner passes and backfills over overlapping ranges, every
occurrence has at most one row, rows that existed are never changed by a backfill, and a
backfill reports exactly the rows it created."""

from __future__ import annotations

from pathlib import Path

import apsw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from appliance.store.usecases.backfill import backfill
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.store.conftest import T0, ScheduleRow, insert_schedule

MINUTE = 60_000

Row = tuple[str, int, int]  # (state, due_at, updated_at)


def all_rows(db: Database, sid: str) -> dict[int, Row]:
    def query(conn: apsw.Connection) -> dict[int, Row]:
        return {
            int(sched): (str(state), int(due), int(updated))
            for sched, state, due, updated in conn.execute(
                "SELECT scheduled_for, state, due_at, updated_at FROM job_runs"
                " WHERE schedule_id = ?",
                (sid,),
            )
        }

    return db.read_now(query)


def duplicates(db: Database) -> int:
    def query(conn: apsw.Connection) -> int:
        row = conn.execute(
            "SELECT COUNT(*) FROM (SELECT 1 FROM job_runs GROUP BY schedule_id, scheduled_for"
            " HAVING COUNT(*) > 1)"
        ).fetchone()
        return int(row[0]) if row else 0

    return db.read_now(query)


step = st.one_of(
    st.tuples(st.just("plan"), st.integers(0, 180), st.just(0)),
    st.tuples(st.just("backfill"), st.integers(-240, 180), st.integers(0, 120)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=12), policy=st.sampled_from(["all", "skip"]))
def test_backfill_and_live_planning_never_make_a_second_row(
    steps: list[tuple[str, int, int]], policy: str, tmp_path_factory: object
) -> None:
    path: Path = tmp_path_factory.mktemp("backfill") / "steeple.db"  # type: ignore[attr-defined]
    db = Database.open(path, threaded=False)
    tenant = db.write_now(create_tenant, name="t", now=T0).tenant_id
    row = ScheduleRow(cron="* * * * *", catchup_policy=policy, next_fire_at=T0)
    sid = db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)
    now = T0
    for action, minutes, length in steps:
        now = max(now, T0 + minutes * MINUTE)  # time only moves on
        before = all_rows(db, sid)
        if action == "plan":
            db.write_now(plan_once, now=now, config=PlannerConfig())
        else:
            start = T0 + minutes * MINUTE
            end = min(start + length * MINUTE, now)
            if end < start:
                continue
            result = db.write_now(
                backfill,
                tenant_id=tenant,
                schedule_id=sid,
                start=start,
                end=end,
                limit=1000,
                dry_run=False,
                now=now,
                rate_per_second=50,
            )
            after = all_rows(db, sid)
            assert result.materialised == len(after) - len(before)
            assert {k: after[k] for k in before} == before  # existing rows untouched
            assert all(start <= k <= end for k in set(after) - set(before))
        assert duplicates(db) == 0
    db.close()
