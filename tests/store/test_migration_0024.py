"""Migration 0024 on both stores: a database at version 23 with runs in every state moves to
the fewer run indexes with every row as it was, and what read the dropped indexes — the
heartbeat, fencing, the last finished run, the pruner, the operator's lateness sample —
answers as before."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from appliance.core.runs import AttemptOutcome, RunState, Transition
from appliance.store.claims import ClaimedRun, claim_runs, renew_leases
from appliance.store.completions import Completion, Finished, complete_runs
from appliance.store.figures.operator import LATENESS_SAMPLE, WINDOW_MS
from appliance.store.figures.operator import _lateness as lateness_sample
from appliance.store.incarnations import previous_incarnation, register_incarnation
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection, on_sqlite
from appliance.store.infra.database import Database
from appliance.store.infra.migrate import migrations
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.infra.schema import schema_version
from appliance.store.retention import MIN_RETENTION_MS, prune
from appliance.store.tenants import create_tenant
from tests.store.conftest import STORES, T0, ScheduleRow, add_due, insert_schedule

MINUTE = 60_000
LEASE = 30_000
DROPPED = {"job_runs_lease_owner", "job_runs_finished"}
# 0024 undone: the two indexes as 0001 and 0004 made them, in each store's words.
_INDEXES_0023 = (
    "CREATE INDEX job_runs_lease_owner ON job_runs(lease_owner) WHERE state = 'running';"
    " CREATE INDEX job_runs_finished ON job_runs({ended})"
    " WHERE state IN ('cancelled', 'failed', 'missed', 'succeeded')"
)
_ROWS = (
    "SELECT id, state, due_at, attempt, lease_owner, lease_token, lease_expires_at,"
    " finished_at, updated_at FROM job_runs ORDER BY id"
)


@pytest.fixture(params=STORES)
def reopen(request: pytest.FixtureRequest, fresh_sqlite: Path) -> Iterator[Callable[[], Store]]:
    """Opens (and so migrates) one store of each kind, again each time it is called."""
    opened: list[Store] = []

    def open_store() -> Store:
        if request.param == "sqlite":
            opened.append(Database.open(fresh_sqlite))
        else:
            opened.append(PgDatabase.open(request.getfixturevalue("pg_store_dsn")))
        return opened[-1]

    yield open_store
    for store in opened:
        store.close()


def _back_to_0023(conn: Connection) -> None:
    if on_sqlite(conn):
        conn.execute(_INDEXES_0023.format(ended="COALESCE(finished_at, updated_at)"))
        conn.execute("PRAGMA user_version = 23")
    else:  # DDL: the raw connection, past the store's dialect check
        raw = conn.raw  # type: ignore[union-attr]
        raw.execute(_INDEXES_0023.format(ended="(COALESCE(finished_at, updated_at))"))
        raw.execute("UPDATE steeple_schema SET version = 23")


def _run_indexes(conn: Connection) -> set[str]:
    sql = (
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'job_runs'"
        if on_sqlite(conn)
        else "SELECT indexname FROM pg_indexes WHERE tablename = 'job_runs'"
    )
    return {str(name) for (name,) in conn.execute(sql)}


def _done(transition: Transition, outcome: AttemptOutcome, due_at: int | None) -> Completion:
    return Completion(
        outcome=outcome,
        transition=transition,
        due_at=due_at,
        failure_reason="exhausted" if transition is Transition.FAIL else None,
        http_status=200 if outcome is AttemptOutcome.OK else 500,
        error=None,
        latency_ms=2,
        response_excerpt=None,
    )


OK = _done(Transition.SUCCEED, AttemptOutcome.OK, None)


def _runs_in_every_state(db: Store) -> tuple[ClaimedRun, ClaimedRun]:
    """Seven runs, one in each state; returns the running one and the succeeded one."""
    tenant = db.write_now(create_tenant, name="acme", now=T0).tenant_id
    schedule = db.write_now(insert_schedule, tenant_id=tenant, row=ScheduleRow(), now=T0)
    add_due(db, tenant, schedule, count=7, first_due=T0)
    at = T0 + MINUTE
    ok, bad, retried, running = db.write_now(
        claim_runs, owner="inc_a", now=at, lease_ms=LEASE, limit=4
    ).runs
    retry = _done(Transition.RETRY, AttemptOutcome.RETRYABLE, at + MINUTE)
    fail = _done(Transition.FAIL, AttemptOutcome.PERMANENT, None)
    done = [Finished(ok, OK, at + 1), Finished(bad, fail, at + 2), Finished(retried, retry, at + 3)]
    assert db.write_now(complete_runs, done) == [True, True, True]

    def miss_and_cancel(conn: Connection) -> None:
        missed, cancelled = [
            rid for (rid,) in conn.execute("SELECT id FROM job_runs WHERE state = 'pending'")
        ][:2]
        conn.execute(  # a missed run records when; a cancelled one here only updated_at
            "UPDATE job_runs SET state = 'missed', finished_at = ?, updated_at = ? WHERE id = ?",
            (at + 4, at + 4, missed),
        )
        conn.execute(
            "UPDATE job_runs SET state = 'cancelled', updated_at = ? WHERE id = ?",
            (at + 5, cancelled),
        )

    db.write_now(miss_and_cancel)
    return running, ok


def test_0024_moves_runs_in_every_state_and_their_readers_answer_the_same(
    reopen: Callable[[], Store],
) -> None:
    old = reopen()
    old.write_now(_back_to_0023)
    assert old.read_now(_run_indexes) >= DROPPED
    running, succeeded = _runs_in_every_state(old)
    before = old.read_now(lambda conn: list(conn.execute(_ROWS)))
    assert {row[1] for row in before} == {state.value for state in RunState}
    old.write_now(register_incarnation, pid=1, now=T0)
    old.close()

    db = reopen()  # migrates 23 → 24
    assert db.read_now(schema_version) == len(migrations()) == 24
    assert db.read_now(_run_indexes).isdisjoint(DROPPED)
    assert db.read_now(lambda conn: list(conn.execute(_ROWS))) == before
    now = T0 + MINUTE + 10
    renewed = db.write_now(renew_leases, owner="inc_a", now=now, lease_ms=LEASE)
    assert renewed == {running.lease_token}  # by owner, through job_runs_leases
    again = [Finished(running, OK, now + 1), Finished(succeeded, OK, now + 1)]
    assert db.write_now(complete_runs, again) == [True, False]  # the second is fenced off
    newest = db.write_now(register_incarnation, pid=2, now=now + 2)
    previous = db.read_now(previous_incarnation, incarnation_id=newest)
    assert previous is not None and previous.last_finished_at == now + 1
    far = now + 2 + MIN_RETENTION_MS  # every finished run is older than the period
    pruned = db.write_now(prune, now=far, retention_ms=MIN_RETENTION_MS, limit=100)
    assert pruned.runs == 5  # succeeded ×2, failed, missed, cancelled
    left = db.read_now(
        lambda conn: sorted(s for (s,) in conn.execute("SELECT state FROM job_runs"))
    )
    assert left == ["pending", "retry_wait"]


def test_the_lateness_sample_merged_by_tenant_and_state_is_the_newest_overall(
    db: Store, make_schedule: Callable[..., str], tenant: str
) -> None:
    """The operator's sample, read one range per tenant and state since 0024, holds the
    runs the one time-ordered read of ``job_runs_finished`` held: the newest
    ``LATENESS_SAMPLE`` finished at their first attempt across every tenant."""
    other = db.write_now(create_tenant, name="beta", now=T0).tenant_id
    theirs = db.write_now(insert_schedule, tenant_id=other, row=ScheduleRow(), now=T0)
    runs = 700  # a tenant: 1,400 in all, more than the sample
    add_due(db, tenant, make_schedule(), count=runs, first_due=T0)
    add_due(db, other, theirs, count=runs, first_due=T0)
    now = T0 + 2 * runs * 1_000

    def finish_all(conn: Connection) -> None:
        ids = [str(i) for (i,) in conn.execute("SELECT id FROM job_runs ORDER BY id")]
        for k, rid in enumerate(ids):  # distinct instants, both tenants interleaved
            state = "succeeded" if k % 3 else "failed"
            conn.execute(
                "UPDATE job_runs SET state = ?, attempt = 1, finished_at = ?, updated_at = ?"
                " WHERE id = ?",
                (state, now - 1 - k * 50, now - 1 - k * 50, rid),
            )
            conn.execute(
                "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id,"
                " started_at, outcome) SELECT id, 1, 't', 'inc_a', due_at + ?, 'ok'"
                " FROM job_runs WHERE id = ?",
                ((k * 37) % 900, rid),
            )

    db.write_now(finish_all)
    since = now - WINDOW_MS
    newest = db.read_now(
        lambda conn: sorted(
            int(late)
            for (late,) in conn.execute(
                "SELECT a.started_at - r.due_at FROM job_runs r JOIN attempts a"
                " ON a.run_id = r.id AND a.attempt = 1 WHERE r.state IN ('succeeded', 'failed')"
                " AND r.attempt = 1 AND r.finished_at >= ? ORDER BY r.finished_at DESC LIMIT ?",
                (since, LATENESS_SAMPLE),
            )
        )
    )
    assert len(newest) == LATENESS_SAMPLE
    assert db.read_now(lateness_sample, since=since) == newest
