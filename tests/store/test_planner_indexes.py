"""The indexes a planned run is written to, and the reads that lost one.

Every run the planner inserts is one entry in each index of ``job_runs`` whose condition
its row meets; each costs WAL pages at every commit (bench/HISTORY.md, "Planner
indexes"). ``job_runs_tenant_time`` was merged into ``job_runs_tenant_state_time``: the
reads it served (a tenant's unfiltered runs list, the restart tally, a schedule's runs)
each seek another index, shown here by SQLite's own query plans."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.store.breaker import release_waiting
from appliance.store.infra.connection import Connection
from appliance.store.infra.database import Database
from appliance.store.materialise import insert_runs, store_body
from appliance.store.restarts import _TALLY
from appliance.store.run_search import RunFilter, search_runs
from appliance.store.runs import list_runs
from tests.store.conftest import T0, MakeSchedule

# Each is one B-tree written per planned (pending) run, beside the table itself.
PLANNED_RUN_INDEXES = {
    "sqlite_autoindex_job_runs_1",  # id (primary key)
    "sqlite_autoindex_job_runs_2",  # (schedule_id, scheduled_for), one run per occurrence
    "job_runs_body",  # retention: is a body still referenced
    "job_runs_claimable_tenant",  # the claim
    "job_runs_tenant_state_time",  # run search, per-state views, the restart tally
}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """This module tests SQLite's query plans: SQLite only."""
    database = Database.open(tmp_path / "steeple.db")
    yield database
    database.close()


def plans_of(db: Database, read: object, **kwargs: object) -> list[str]:
    """Every query plan detail line of the job_runs SELECTs ``read`` runs."""
    seen: list[str] = []

    def run(conn: object) -> None:
        assert isinstance(conn, apsw.Connection)

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if sql.startswith("SELECT") and "FROM job_runs" in sql:
                seen.extend(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings))
            return True

        conn.exec_trace = trace
        try:
            read(conn, **kwargs)  # type: ignore[operator]
        finally:
            conn.exec_trace = None

    db.read_now(run)
    return seen


def test_a_planned_run_is_written_to_five_indexes(db: Database) -> None:
    """An index added to job_runs whose condition a pending run meets costs every planned
    run a B-tree write: measure it and add it here (bench/HISTORY.md)."""
    written: set[str] = set()
    for name, sql in db.read_now(
        lambda conn: list(
            conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'job_runs'"
            )
        )
    ):
        partial = sql is not None and " WHERE " in sql
        # The partial indexes a pending run (no overlap, no resend) is not in.
        skipped = ("'running'", "'cancelled', 'failed'", "overlap IS NOT", "resend_of IS NOT")
        if not (partial and any(cond in sql for cond in skipped)):
            written.add(name)
    assert written == PLANNED_RUN_INDEXES


def test_the_tenant_time_index_is_gone(db: Database) -> None:
    names = db.read_now(
        lambda conn: {
            n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
    )
    assert "job_runs_tenant_time" not in names
    assert "job_runs_tenant_state_time" in names


def one_run_in_each_state(conn: Connection, *, tenant_id: str, schedule_id: str) -> None:
    digest = store_body(conn, content_type="application/json", body=b"{}")
    for minute, state in enumerate(RunState):
        run = occurrence_run(
            schedule_id=schedule_id,
            tenant_id=tenant_id,
            schedule_version=1,
            scheduled_for=T0 + minute * 60_000,
            due_at=T0 + minute * 60_000,
            state=RunState.PENDING,
            trigger=Trigger.SCHEDULE,
            body_digest=digest,
        )
        insert_runs(conn, [run], now=T0)
        conn.execute("UPDATE job_runs SET state = ? WHERE id = ?", (state.value, run.id))


@pytest.mark.parametrize("paged", [False, True], ids=["first page", "next page"])
def test_a_tenants_unfiltered_runs_are_one_seek_per_state(
    db: Database, tenant: str, make_schedule: MakeSchedule, paged: bool
) -> None:
    schedule_id = make_schedule()
    db.write_now(one_run_in_each_state, tenant_id=tenant, schedule_id=schedule_id)
    paging = {"before": (T0 + 7 * 60_000, "run_x")} if paged else {}
    everything = db.read_now(search_runs, tenant_id=tenant, where=RunFilter(), limit=50)
    assert [run.state for run in everything] == [*reversed(RunState)]  # newest first
    found = plans_of(db, search_runs, tenant_id=tenant, where=RunFilter(), limit=50, **paging)
    *ranges, fetch = found
    assert len(ranges) == 7, found  # one bounded range per state, merged
    for detail in ranges:  # index entries only: the rows are read after the merge
        assert "COVERING INDEX job_runs_tenant_state_time (tenant_id=? AND state=?" in detail, found
    assert "USING INDEX sqlite_autoindex_job_runs_1 (id=?)" in fetch, found


def test_a_schedules_runs_seek_the_occurrence_index(db: Database) -> None:
    (detail,) = plans_of(db, list_runs, tenant_id="ten_a", schedule_id="sch_a", limit=50)
    assert "USING INDEX sqlite_autoindex_job_runs_2 (schedule_id=?)" in detail


def test_the_restart_tally_seeks_each_tenants_counted_states(db: Database) -> None:
    found = db.read_now(
        lambda conn: [
            str(r[-1])
            for r in conn.execute(f"EXPLAIN QUERY PLAN {_TALLY.sqlite}", {"since": 0, "until": 1})
        ]
    )
    runs = [d for d in found if d.startswith(("SEARCH r ", "SCAN r"))]
    assert runs == [
        "SEARCH r USING INDEX job_runs_tenant_state_time"
        " (tenant_id=? AND state=? AND scheduled_for>? AND scheduled_for<?)"
    ], found


def test_a_closing_breaker_reads_only_the_claimable_runs(db: Database) -> None:
    """Closing a breaker looks for the runs waiting on it among the claimable runs (a
    partial index), not by walking every run the table holds."""
    found = plans_of(db, release_waiting, origin="https://example.com:443", now=T0)
    runs = [d for d in found if d.startswith(("SEARCH r", "SCAN r"))]
    assert runs == ["SCAN r USING INDEX job_runs_claimable_tenant"], found
