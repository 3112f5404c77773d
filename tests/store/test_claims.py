"""The claim: fair turns between tenants, the per-tenant cap, one statement through the
partial indexes, and a constant number of statements whatever the batch size."""

from __future__ import annotations

import re

import apsw
import pytest

from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.store import claims
from appliance.store.claims import ClaimBatch, claim_runs
from appliance.store.infra.database import Database
from appliance.store.materialise import insert_runs, store_body
from appliance.store.tenants import create_tenant
from tests.store.conftest import SQLITE_ONLY, T0, ScheduleRow, insert_schedule

LEASE = 30_000
SECOND = 1_000


def new_tenant(db: Database, name: str) -> tuple[str, str]:
    """A tenant and one schedule of it: ``(tenant_id, schedule_id)``."""
    tenant = db.write_now(create_tenant, name=name, now=T0).tenant_id
    schedule = db.write_now(insert_schedule, tenant_id=tenant, row=ScheduleRow(), now=T0)
    return tenant, schedule


def add_due(db: Database, tenant: str, schedule: str, *, count: int, first_due: int) -> None:
    """``count`` pending runs of ``schedule``, one a second from ``first_due``."""

    def insert(conn: apsw.Connection) -> None:
        digest = store_body(conn, content_type="application/json", body=b"{}")
        runs = [
            occurrence_run(
                schedule_id=schedule,
                tenant_id=tenant,
                schedule_version=1,
                scheduled_for=first_due + k * SECOND,
                due_at=first_due + k * SECOND,
                state=RunState.PENDING,
                trigger=Trigger.SCHEDULE,
                body_digest=digest,
            )
            for k in range(count)
        ]
        assert len(insert_runs(conn, runs, now=T0)) == count

    db.write_now(insert)


def claim(db: Database, *, now: int, limit: int, cap: int | None = None) -> ClaimBatch:
    return db.write_now(
        claim_runs, owner="inc_a", now=now, lease_ms=LEASE, limit=limit, tenant_cap=cap
    )


def tenants_of(batch: ClaimBatch) -> list[str]:
    return [run.tenant_id for run in batch.runs]


def test_a_backlog_does_not_crowd_out_another_tenants_due_run(db: Database) -> None:
    noisy, noisy_schedule = new_tenant(db, "noisy")
    quiet, quiet_schedule = new_tenant(db, "quiet")
    add_due(db, noisy, noisy_schedule, count=50, first_due=T0)  # due long before quiet's
    add_due(db, quiet, quiet_schedule, count=1, first_due=T0 + 60 * SECOND)
    batch = claim(db, now=T0 + 60 * SECOND, limit=4)
    # Earliest-due-first alone would have given all four slots to the backlog.
    assert sorted(tenants_of(batch)) == sorted([noisy, noisy, noisy, quiet])


def test_turns_count_what_a_tenant_already_has_running(db: Database) -> None:
    a, a_schedule = new_tenant(db, "a")
    b, b_schedule = new_tenant(db, "b")
    add_due(db, a, a_schedule, count=20, first_due=T0)
    assert tenants_of(claim(db, now=T0 + 30 * SECOND, limit=5)) == [a] * 5
    add_due(db, b, b_schedule, count=20, first_due=T0 + 10 * SECOND)
    # a holds 5: b's first five turns (1-5) come before a's next (6), then they alternate.
    second = claim(db, now=T0 + 30 * SECOND, limit=7)
    assert sorted(tenants_of(second)) == sorted([b] * 6 + [a])


def test_no_tenant_holds_more_than_its_cap(db: Database) -> None:
    capped, capped_schedule = new_tenant(db, "capped")
    other, other_schedule = new_tenant(db, "other")
    add_due(db, capped, capped_schedule, count=10, first_due=T0)
    first = claim(db, now=T0 + 20 * SECOND, limit=8, cap=3)
    assert tenants_of(first) == [capped] * 3
    # Only the capped tenant has due runs: the batch says so, and names no due time to
    # wake for (its runs wait for one of its own slots).
    assert first.capped == frozenset({capped}) and first.next_due_at is None
    add_due(db, other, other_schedule, count=2, first_due=T0 + 25 * SECOND)
    second = claim(db, now=T0 + 20 * SECOND, limit=8, cap=3)
    assert second.runs == () and second.next_due_at == T0 + 25 * SECOND
    third = claim(db, now=T0 + 26 * SECOND, limit=8, cap=3)
    assert tenants_of(third) == [other, other] and third.capped == frozenset({capped})


def test_without_a_cap_a_lone_tenant_takes_every_free_slot(db: Database) -> None:
    tenant, schedule = new_tenant(db, "alone")
    add_due(db, tenant, schedule, count=30, first_due=T0)
    assert len(claim(db, now=T0 + 30 * SECOND, limit=16).runs) == 16
    assert len(claim(db, now=T0 + 30 * SECOND, limit=16).runs) == 14


@SQLITE_ONLY
@pytest.mark.parametrize(
    "statement", [claims._CLAIM.sqlite, claims._CLAIM_ALONE.sqlite, claims._WAITING]
)
def test_the_claim_is_one_statement_through_the_partial_indexes(
    db: Database, statement: str
) -> None:
    def plan(conn: apsw.Connection) -> list[str]:
        params = {"owner": "o", "now": T0, "expires": T0 + LEASE, "limit": 8, "cap": 4}
        params["tenant"] = "ten_x"
        used = {name: value for name, value in params.items() if f":{name}" in statement}
        return [str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}", used)]

    details = db.read_now(plan)
    assert any("USING INDEX job_runs_claimable_tenant (tenant_id=?" in d for d in details)
    for detail in details:  # job_runs is never read in full: every access is by an index
        if re.match(r"(SCAN|SEARCH) (job_runs|r)\b", detail):
            assert " USING " in detail, detail


@SQLITE_ONLY
@pytest.mark.parametrize("count", [1, 24])
def test_a_claims_statements_do_not_grow_with_its_batch(db: Database, count: int) -> None:
    tenant, schedule = new_tenant(db, "t")
    add_due(db, tenant, schedule, count=count, first_due=T0)
    statements: list[str] = []

    def traced(conn: apsw.Connection) -> ClaimBatch:
        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            statements.append(sql)
            return True

        conn.exec_trace = trace
        try:
            return claim_runs(conn, owner="inc_a", now=T0 + 60 * SECOND, lease_ms=LEASE, limit=32)
        finally:
            conn.exec_trace = None

    batch = db.write_now(traced)
    assert len(batch.runs) == count
    assert all(run.secrets and run.body == b"{}" for run in batch.runs)
    # the overlap gate (docs/schedules.md), who waits, the claim, attempts rows, details,
    # secrets, who still waits: seven, for 1 run or 24.
    assert len(statements) == 7, statements
    attempts = db.read_now(lambda c: c.execute("SELECT COUNT(*) FROM attempts").fetchone()[0])
    assert attempts == count


@SQLITE_ONLY
@pytest.mark.parametrize(
    "statement", [claims._CLAIM.sqlite, claims._CLAIM_ALONE.sqlite, claims._WAITING]
)
def test_the_claim_seeks_and_never_walks_a_whole_index_of_job_runs(
    db: Database, statement: str
) -> None:
    """Counting each waiting tenant's running runs once walked all of
    ``job_runs_tenant_state_time`` (a SCAN through an index is still every row): twice
    per claim, the claim's largest cost, and growing with the table. Every access is a
    bounded SEARCH now (no ``SCAN job_runs USING … INDEX``)."""
    tenant, schedule = new_tenant(db, "t")
    add_due(db, tenant, schedule, count=50, first_due=T0)
    claim(db, now=T0 + 60 * SECOND, limit=8)  # some running (no ANALYZE: as the appliance)

    def plan(conn: apsw.Connection) -> list[str]:
        params = {"owner": "o", "now": T0, "expires": T0 + LEASE, "limit": 8, "cap": 4}
        params["tenant"] = tenant
        used = {name: value for name, value in params.items() if f":{name}" in statement}
        return [str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}", used)]

    details = db.read_now(plan)
    walks = [d for d in details if re.match(r"SCAN (job_runs|r|b)\b", d)]
    assert walks == [], details


@SQLITE_ONLY
@pytest.mark.parametrize("statement", [claims._CLAIM.sqlite, claims._WAITING])
def test_each_waiting_tenants_running_runs_are_counted_once(db: Database, statement: str) -> None:
    """The running runs of a waiting tenant are counted in one grouped pass, not by a
    correlated count that SQLite evaluates again for every candidate row of the turns
    (it doubled the cost of a claim among 50 tenants)."""

    def plan(conn: apsw.Connection) -> dict[int, tuple[int, str]]:
        params = {"owner": "o", "now": T0, "expires": T0 + LEASE, "limit": 8, "cap": 4}
        used = {name: value for name, value in params.items() if f":{name}" in statement}
        rows = conn.execute(f"EXPLAIN QUERY PLAN {statement}", used)
        return {int(node): (int(parent), str(detail)) for node, parent, _, detail in rows}

    nodes = db.read_now(plan)
    counts = [parent for parent, detail in nodes.values() if detail.startswith("SEARCH b ")]
    assert counts, nodes
    for parent in counts:
        assert not nodes[parent][1].startswith("CORRELATED"), nodes
