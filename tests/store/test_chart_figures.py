"""The charts' reads (store/figures/charts.py) on both stores: deliveries and lateness per
hour for the dashboard, a schedule's strip of recent runs."""

from __future__ import annotations

from typing import Any

from appliance.core.runs import RunState
from appliance.store.figures.charts import (
    HOUR_MS,
    HourDeliveries,
    HourLateness,
    deliveries_per_hour,
    lateness_per_hour,
    schedule_strip,
    window_start,
)
from appliance.store.infra.backend import Store
from appliance.store.tenants import create_tenant
from tests.store.conftest import T0, MakeSchedule
from tests.store.test_runs import add_run, schedule_value

NOW = T0 + 30 * HOUR_MS + HOUR_MS // 2  # mid-hour: the window is 24 whole hours ending with it
THIS_HOUR = NOW // HOUR_MS * HOUR_MS


def finish(
    conn: Any, run_id: str, *, state: RunState, attempts: int, started: int, ended: int
) -> None:
    """Make a run finished with ``attempts`` attempts, the first started at ``started``."""
    conn.execute(
        "UPDATE job_runs SET state = ?, attempt = ?, finished_at = ?, updated_at = ? WHERE id = ?",
        (str(state), attempts, ended, ended, run_id),
    )
    for n in range(1, attempts + 1):
        conn.execute(
            "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id, started_at,"
            " finished_at, outcome, http_status) VALUES (?, ?, 'tok', 'inc', ?, ?, ?, ?)",
            (
                run_id,
                n,
                started + n - 1,
                ended,
                "ok" if state is RunState.SUCCEEDED else "permanent",
                200,
            ),
        )


def seed(
    db: Store, schedule_id: str, tenant: str, runs: list[tuple[int, RunState, int, int]]
) -> list[str]:
    """``runs``: (scheduled_for, state, attempts, lateness of the first attempt)."""
    schedule = schedule_value(schedule_id, tenant)

    def write(conn: Any) -> list[str]:
        ids = []
        for at, state, attempts, late in runs:
            rid = add_run(conn, schedule=schedule, scheduled_for=at)
            finish(
                conn, rid, state=state, attempts=attempts, started=at + late, ended=at + late + 50
            )
            ids.append(rid)
        return ids

    return db.write_now(write)


def test_deliveries_count_per_hour_by_outcome_and_only_the_tenants(
    db: Store, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule()
    two_back = THIS_HOUR - 2 * HOUR_MS
    seed(
        db,
        sid,
        tenant,
        [
            (two_back + 1_000, RunState.SUCCEEDED, 1, 10),
            (two_back + 2_000, RunState.SUCCEEDED, 1, 10),
            (two_back + 3_000, RunState.SUCCEEDED, 3, 10),
            (two_back + 4_000, RunState.FAILED, 8, 10),
            (THIS_HOUR + 5_000, RunState.FAILED, 1, 10),
            (window_start(NOW) - HOUR_MS, RunState.SUCCEEDED, 1, 10),  # before the window
        ],
    )
    other = db.write_now(create_tenant, name="other", now=T0).tenant_id
    other_sid = make_schedule()  # the fixture's tenant; re-owned below
    db.write_now(
        lambda c: c.execute("UPDATE schedules SET tenant_id = ? WHERE id = ?", (other, other_sid))
    )
    seed(db, other_sid, other, [(THIS_HOUR + 9_000, RunState.SUCCEEDED, 1, 10)])

    assert db.read_now(deliveries_per_hour, tenant_id=tenant, now=NOW) == [
        HourDeliveries(hour=two_back, succeeded=2, retried=1, failed=1),
        HourDeliveries(hour=THIS_HOUR, succeeded=0, retried=0, failed=1),
    ]


def test_lateness_percentiles_per_hour_count_first_attempt_runs_only(
    db: Store, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule()
    hour = THIS_HOUR - HOUR_MS
    lates = [100, 200, 300, 400, 500, 600, 700, 800, 900, 10_000]
    runs = [(hour + i * 10_000, RunState.SUCCEEDED, 1, late) for i, late in enumerate(lates)]
    runs.append((hour + 900_000, RunState.SUCCEEDED, 2, 99_999))  # retried: left out
    seed(db, sid, tenant, runs)
    assert db.read_now(lateness_per_hour, tenant_id=tenant, now=NOW) == [
        HourLateness(hour=hour, runs=10, p50_ms=500, p95_ms=10_000)
    ]
    assert db.read_now(lateness_per_hour, tenant_id=tenant, now=NOW + 25 * HOUR_MS) == []


def test_a_schedules_strip_is_its_newest_runs_oldest_first(
    db: Store, tenant: str, make_schedule: MakeSchedule
) -> None:
    sid = make_schedule()
    runs = [(T0 + i * 60_000, RunState.SUCCEEDED, 1, 40 + i) for i in range(5)]
    runs[3] = (runs[3][0], RunState.FAILED, 2, 7)
    ids = seed(db, sid, tenant, runs)
    strip = db.read_now(schedule_strip, tenant_id=tenant, schedule_id=sid, most=4)
    assert [r.id for r in strip] == ids[1:]
    assert [r.state for r in strip] == [RunState.SUCCEEDED] * 2 + [
        RunState.FAILED,
        RunState.SUCCEEDED,
    ]
    assert [r.lateness_ms for r in strip] == [41, 42, None, 44]
    assert db.read_now(schedule_strip, tenant_id="ten_nobody", schedule_id=sid) == []
