"""The claim: fair turns between tenants, the per-tenant cap, and a batch claimed at once
the same as run by run (its plans: tests/store/test_query_plans.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.store.claims import ClaimBatch, ClaimedRun, claim_runs
from appliance.store.infra.backend import Store
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.store.conftest import T0, ScheduleRow, add_due, insert_schedule

LEASE = 30_000
SECOND = 1_000


def new_tenant(db: Database, name: str) -> tuple[str, str]:
    """A tenant and one schedule of it: ``(tenant_id, schedule_id)``."""
    tenant = db.write_now(create_tenant, name=name, now=T0).tenant_id
    schedule = db.write_now(insert_schedule, tenant_id=tenant, row=ScheduleRow(), now=T0)
    return tenant, schedule


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


@pytest.mark.parametrize("count", [1, 24])
def test_one_claim_of_a_batch_is_the_same_as_claiming_it_run_by_run(
    tmp_path: Path, db: Store, count: int
) -> None:
    """Batching is only a cost: a claim of ``count`` runs leases the same runs, with the
    same attempts, secrets and bodies, as ``count`` claims of one each."""
    tenant, schedule = new_tenant(db, "t")
    add_due(db, tenant, schedule, count=count, first_due=T0)
    other = Database.open(tmp_path / "one-by-one.db")
    try:
        twin, twin_schedule = new_tenant(other, "t")
        add_due(other, twin, twin_schedule, count=count, first_due=T0)
        batched = claim(db, now=T0 + 60 * SECOND, limit=32).runs
        singles = [
            run for _ in range(count) for run in claim(other, now=T0 + 60 * SECOND, limit=1).runs
        ]
        assert claim(other, now=T0 + 60 * SECOND, limit=1).runs == ()
        assert len(batched) == count
        assert sorted(map(claimed, batched)) == sorted(map(claimed, singles))
        assert all(run.secrets and run.body == b"{}" for run in batched)
        assert attempts(db) == attempts(other) == [(1, "open")] * count
    finally:
        other.close()


def claimed(run: ClaimedRun) -> tuple[int, int, bytes, str, str, int, int]:
    """What a claim gives a run, less its ids and secrets (each database made its own)."""
    return (
        run.scheduled_for,
        run.attempt,
        run.body,
        run.content_type,
        run.target_url,
        run.timeout_seconds,
        len(run.secrets),
    )


def attempts(db: Store) -> list[tuple[int, str]]:
    """Each attempt row's number and outcome ("open": not finished)."""
    return db.read_now(
        lambda conn: [
            (int(n), "open" if outcome is None else str(outcome))
            for n, outcome in conn.execute("SELECT attempt, outcome FROM attempts ORDER BY 1, 2")
        ]
    )
