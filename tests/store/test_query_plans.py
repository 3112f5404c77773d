"""The query plans Steeple's speed rests on, in one place (marker ``perf_cliff``).

Each test here pins one plan whose loss is a cliff, not a slope: a read that touches a
page's worth of index entries would instead walk a tenant's whole history, every run of
the table, or sort every match — the claim, the planner pass, the pruner and the pages
would grow with the data kept (bench/HISTORY.md names what each cost when it was lost).
How a query answers is tested elsewhere by its answers; only these say how it runs.
SQLite's plans are read with ``EXPLAIN QUERY PLAN``; the claims' row locks are read from
PostgreSQL's ``EXPLAIN`` as well (docs/adr/0044-postgresql-store.md).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

import apsw
import pytest

from appliance.core.events import EventType
from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.store import claims, notifications
from appliance.store.breaker import release_waiting
from appliance.store.claims import claim_runs, renew_leases
from appliance.store.events import list_events, newest_feed_seq
from appliance.store.figures.operator import LATENESS_RANGE
from appliance.store.figures.tenants import FINISHED_SINCE_SQL
from appliance.store.incarnations import _LAST_FINISHED
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import SKIP_LOCKED, Connection, row_locks
from appliance.store.infra.database import Database
from appliance.store.materialise import insert_runs, store_body
from appliance.store.planning import PLANNABLE_SQL
from appliance.store.restarts import _TALLY
from appliance.store.retention import OLD_FINISHED_SQL
from appliance.store.run_search import RunFilter, search_runs
from appliance.store.runs import list_runs
from appliance.store.usecases.reclaim import reclaim_previous
from tests.store.conftest import SQLITE_ONLY, T0, MakeSchedule, add_due

pytestmark = pytest.mark.perf_cliff

LEASE = 30_000
CLAIM_PARAMS = {"owner": "o", "now": T0, "expires": T0 + LEASE, "until": T0 + LEASE}
CLAIM_PARAMS |= {"limit": 8, "cap": 4, "tenant": "ten_x", "locked": '["ten_x"]'}
FETCH = " WHERE id IN ("  # several ranges: the page's rows, read by id after the merge


def plan(db: Store, sql: str, params: Any = ()) -> list[str]:
    """SQLite's plan of one statement, a detail line per step (executes nothing)."""
    return db.read_now(
        lambda conn: [str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
    )


def plans_of(
    db: Store, read: Callable[..., object], table: str, *, write: bool = False, **kwargs: object
) -> list[str]:
    """The plan of every SELECT from ``table`` (and UPDATE of it) that ``read(conn,
    **kwargs)`` runs — in a write transaction when ``write``; the fetch of a merged page's
    rows by id tagged ``FETCH``."""
    seen: list[str] = []

    def run(conn: object) -> None:
        assert isinstance(conn, apsw.Connection)

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            selects = sql.startswith("SELECT") and f"FROM {table}" in sql
            if selects or sql.startswith(f"UPDATE {table} "):
                tag = "FETCH " if FETCH in sql else ""
                rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings)
                seen.extend(tag + str(row[-1]) for row in rows)
            return True

        conn.exec_trace = trace
        try:
            read(conn, **kwargs)
        finally:
            conn.exec_trace = None

    if write:
        db.write_now(run)
    else:
        db.read_now(run)
    return seen


def claim_params(statement: str, **changes: object) -> dict[str, object]:
    params = CLAIM_PARAMS | changes
    return {name: value for name, value in params.items() if f":{name}" in statement}


# --- Run search and the runs lists -------------------------------------------------------

S = RunState
RUN_FILTERS = {
    "states": frozenset({S.FAILED}),
    "schedule_id": "sch_x",
    "since": T0,
    "until": T0 + 60_000,
    "http_status": 500,
}
COMBINATIONS = [
    dict(combo)
    for size in range(len(RUN_FILTERS) + 1)
    for combo in itertools.combinations(RUN_FILTERS.items(), size)
]


@SQLITE_ONLY
@pytest.mark.parametrize("filters", COMBINATIONS, ids=lambda f: "+".join(f) or "none")
@pytest.mark.parametrize("paged", [False, True], ids=["first page", "next page"])
@pytest.mark.parametrize("two_states", [False, True], ids=["one state", "two states"])
def test_every_run_search_reads_an_index_range_in_order(
    db: Database, filters: dict[str, object], paged: bool, two_states: bool
) -> None:
    """No scan of the table, no sort of every match, and a deep page reads no earlier
    pages: a tenant's run search costs its page, whatever the history."""
    if two_states and "states" in filters:
        filters = {**filters, "states": frozenset({S.FAILED, S.RETRY_WAIT})}
    paging: dict[str, object] = {"before": (T0 + 30_000, "run_x")} if paged else {}
    where = RunFilter(**filters)  # type: ignore[arg-type]
    found = plans_of(
        db, search_runs, "job_runs", tenant_id="ten_a", where=where, limit=50, **paging
    )
    assert found, "no query ran"
    fetches = [d for d in found if d.startswith("FETCH ")]
    assert all("USING INDEX sqlite_autoindex_job_runs_1 (id=?)" in d for d in fetches), found
    found = [d for d in found if not d.startswith("FETCH ")]
    for detail in found:
        assert "USING INDEX" in detail or "USING COVERING INDEX" in detail, found
        assert "TEMP B-TREE" not in detail, found
        if paged:  # the range starts at the cursor
            assert "scheduled_for<?" in detail or "(scheduled_for,id)<(?,?)" in detail, found
    if "schedule_id" not in filters:  # a tenant's runs are read by the tenant's own index
        assert all("job_runs_tenant" in detail for detail in found), found


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


@SQLITE_ONLY
@pytest.mark.parametrize("paged", [False, True], ids=["first page", "next page"])
def test_a_tenants_unfiltered_runs_are_one_seek_per_state(
    db: Database, tenant: str, make_schedule: MakeSchedule, paged: bool
) -> None:
    """Index entries only, one bounded range per state merged; the page's rows are read
    after the merge."""
    db.write_now(one_run_in_each_state, tenant_id=tenant, schedule_id=make_schedule())
    paging = {"before": (T0 + 7 * 60_000, "run_x")} if paged else {}
    everything = db.read_now(search_runs, tenant_id=tenant, where=RunFilter(), limit=50)
    assert [run.state for run in everything] == [*reversed(RunState)]  # newest first
    found = plans_of(
        db, search_runs, "job_runs", tenant_id=tenant, where=RunFilter(), limit=50, **paging
    )
    *ranges, fetch = found
    assert len(ranges) == 7, found
    for detail in ranges:
        assert "COVERING INDEX job_runs_tenant_state_time (tenant_id=? AND state=?" in detail, found
    assert "FETCH" in fetch and "USING INDEX sqlite_autoindex_job_runs_1 (id=?)" in fetch, found


@SQLITE_ONLY
def test_a_schedules_runs_seek_the_occurrence_index(db: Database) -> None:
    (detail,) = plans_of(
        db, list_runs, "job_runs", tenant_id="ten_a", schedule_id="sch_a", limit=50
    )
    assert "USING INDEX sqlite_autoindex_job_runs_2 (schedule_id=?)" in detail


# --- The event feed ------------------------------------------------------------------------

E = EventType


@SQLITE_ONLY
@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"types": frozenset({E.RUN_FAILED})},
        {"types": frozenset({E.RUN_FAILED, E.SCHEDULE_PAUSED})},
        {"schedule_id": "sch_x"},
        {"schedule_id": "sch_x", "types": frozenset({E.RUN_FAILED})},
    ],
    ids=["none", "one type", "two types", "schedule", "schedule and type"],
)
def test_every_event_feed_filter_reads_an_index_range_in_seq_order(
    db: Database, filters: dict[str, object]
) -> None:
    """No scan of a tenant's whole history, no sort of every match."""
    found = plans_of(db, list_events, "events", tenant_id="ten_a", limit=50, **filters)
    assert found, "no query ran"
    for detail in found:
        assert "USING INDEX" in detail or "USING COVERING INDEX" in detail, found
        assert "TEMP B-TREE" not in detail, found


@SQLITE_ONLY
def test_a_live_pages_newest_seq_is_one_backwards_seek_per_tenant(db: Database) -> None:
    """The schedule and run pages read it on every load (appliance/ui/live_pages.py)."""
    found = plans_of(db, newest_feed_seq, "events", tenant_id="ten_a")
    assert len(found) == 2, found  # the tenant's and the system's
    for detail in found:
        assert "USING COVERING INDEX events_tenant" in detail, found
        assert "TEMP B-TREE" not in detail, found


# --- Counts the pages and the operator show ------------------------------------------------


@SQLITE_ONLY
def test_finished_counts_are_covering_index_ranges(db: Database) -> None:
    """The dashboard's and the tenant list's counts read index entries only, bounded by
    time in the range itself (then capped), not by a filter over a tenant's history."""
    (step,) = plan(db, FINISHED_SINCE_SQL.sqlite, ("ten_x", "succeeded", 0))
    assert "COVERING INDEX job_runs_tenant_finished" in step
    assert "<expr>>?" in step


@SQLITE_ONLY
def test_the_restart_tally_seeks_each_tenants_counted_states(db: Database) -> None:
    found = plan(db, _TALLY.sqlite, {"since": 0, "until": 1})
    runs = [d for d in found if d.startswith(("SEARCH r ", "SCAN r"))]
    assert runs == [
        "SEARCH r USING INDEX job_runs_tenant_state_time"
        " (tenant_id=? AND state=? AND scheduled_for>? AND scheduled_for<?)"
    ], found


# --- The engine's own reads: claim, planner, breaker, pruner -------------------------------

CLAIMS = [claims._CLAIM.sqlite, claims._CLAIM_ALONE.sqlite, claims._WAITING]


@SQLITE_ONLY
@pytest.mark.parametrize("statement", CLAIMS, ids=["contested", "alone", "waiting"])
def test_the_claim_seeks_through_the_partial_index_and_never_walks_job_runs(
    db: Database, tenant: str, make_schedule: MakeSchedule, statement: str
) -> None:
    """Every access to job_runs is a bounded SEARCH (a SCAN through an index is still
    every row: counting waiting tenants' running runs once walked all of
    ``job_runs_tenant_state_time``, twice per claim)."""
    add_due(db, tenant, make_schedule(), count=50, first_due=T0)
    db.write_now(claim_runs, owner="inc_a", now=T0 + 60_000, lease_ms=LEASE, limit=8)
    details = plan(db, statement, claim_params(statement, tenant=tenant))
    if statement != claims._WAITING:
        assert any("USING INDEX job_runs_claimable_tenant (tenant_id=?" in d for d in details)
    walks = [d for d in details if re.match(r"SCAN (job_runs|r|b)\b", d)]
    assert walks == [], details


@SQLITE_ONLY
@pytest.mark.parametrize("statement", [claims._CLAIM.sqlite, claims._WAITING])
def test_each_waiting_tenants_running_runs_are_counted_once(db: Database, statement: str) -> None:
    """One grouped pass, not a correlated count SQLite evaluates again for every
    candidate row of the turns."""

    def nodes_of(conn: apsw.Connection) -> dict[int, tuple[int, str]]:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {statement}", claim_params(statement))
        return {int(node): (int(parent), str(detail)) for node, parent, _, detail in rows}

    nodes = db.read_now(nodes_of)
    counts = [parent for parent, detail in nodes.values() if detail.startswith("SEARCH b ")]
    assert counts, nodes
    for parent in counts:
        assert not nodes[parent][1].startswith("CORRELATED"), nodes


@pytest.mark.parametrize(
    "claim",
    {
        "runs, contested": claims._CLAIM,
        "runs, one tenant": claims._CLAIM_ALONE,
        "notifications": notifications._CLAIM,
    }.items(),
    ids=lambda item: item[0],
)
def test_a_claim_skips_locked_rows_on_postgresql_and_says_nothing_of_it_on_sqlite(
    db: Store, claim: tuple[str, Any]
) -> None:
    """Replicas claiming at once pass over each other's rows instead of waiting."""

    def check(conn: Connection) -> None:
        statement = claim[1].on(conn)
        if isinstance(db, Database):
            assert row_locks(conn) == "" and "FOR UPDATE" not in statement
            return
        assert row_locks(conn) == SKIP_LOCKED and SKIP_LOCKED in statement
        rows = conn.execute(f"EXPLAIN {statement}", claim_params(statement))
        said = "\n".join(str(row[-1]) for row in rows)
        assert "LockRows" in said, said

    db.read_now(check)


@SQLITE_ONLY
def test_due_cursors_use_the_partial_index(db: Database) -> None:
    found = plan(
        db,
        f"SELECT id FROM schedules WHERE {PLANNABLE_SQL}"
        " AND next_fire_at <= 5 ORDER BY next_fire_at LIMIT 9",
    )
    assert any("schedules_due" in detail for detail in found), found


@SQLITE_ONLY
def test_a_closing_breaker_reads_only_the_claimable_runs(db: Database) -> None:
    """The runs waiting on a breaker are looked for among the claimable runs (a partial
    index), not by walking every run the table holds."""
    found = plans_of(db, release_waiting, "job_runs", origin="https://example.com:443", now=T0)
    runs = [d for d in found if d.startswith(("SEARCH r", "SCAN r"))]
    assert runs == ["SCAN r USING INDEX job_runs_claimable_tenant"], found


@SQLITE_ONLY
def test_finding_old_runs_seeks_each_tenants_finished_runs(db: Database) -> None:
    """With nothing old enough the pruner reads no run (it runs on the writer): one range
    of ``job_runs_tenant_finished`` per tenant and state, never a walk of that index."""
    found = plan(db, OLD_FINISHED_SQL, (T0, 10))
    runs = [d for d in found if d.startswith(("SEARCH r", "SCAN r"))]
    assert runs == [
        "SEARCH r USING INDEX job_runs_tenant_finished (tenant_id=? AND state=? AND <expr><?)"
    ], found


@SQLITE_ONLY
def test_the_last_finished_run_is_one_max_probe_per_tenant(db: Database) -> None:
    """The restart report's "last run finished" (store/incarnations.py) at boot."""
    found = plan(db, _LAST_FINISHED)
    runs = [d for d in found if d.startswith(("SEARCH r", "SCAN r"))]
    assert runs == [
        "SEARCH r USING COVERING INDEX job_runs_tenant_finished (tenant_id=? AND state=?)"
    ], found


@SQLITE_ONLY
def test_the_operators_lateness_sample_reads_newest_first_within_the_window(
    db: Database,
) -> None:
    """/admin/health and /metrics: each tenant's and state's range, newest first, no sort."""
    found = plan(db, LATENESS_RANGE.sqlite, ("ten_x", "succeeded", T0, 1000))
    assert found[0] == (
        "SEARCH r USING INDEX job_runs_tenant_finished (tenant_id=? AND state=? AND <expr>>?)"
    ), found
    assert not any("TEMP B-TREE" in detail for detail in found), found


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("call", "kwargs"),
    [
        (renew_leases, {"owner": "inc_a", "now": T0, "lease_ms": LEASE}),
        (reclaim_previous, {"incarnation_id": "inc_a", "now": T0}),
    ],
    ids=["heartbeat", "boot reclaim"],
)
def test_reads_of_the_running_runs_walk_only_their_lease_index(
    db: Database, call: Callable[..., object], kwargs: dict[str, object]
) -> None:
    """By owner or not, a read of running runs walks ``job_runs_leases``: it holds the
    running runs only, at most the delivery slots (migration 0024)."""
    found = plans_of(db, call, "job_runs", write=True, **kwargs)
    running = [d for d in found if "job_runs_leases" in d]
    assert running, found
    walks = [d for d in found if re.match(r"SCAN (job_runs|r)\b", d) and d not in running]
    assert walks == [], found
