"""Round trips to PostgreSQL, counted by the store (``PgDatabase.round_trips``): each wait
for the server's answer. The counts are the promise that the hot path's cost per
delivery does not grow with the batch: a claim of many runs and the outcomes written
together take the round trips of one (docs/scale-out.md, "Fewer round trips")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from appliance.store.claims import claim_runs
from appliance.store.completions import Finished, complete_runs
from appliance.store.infra.connection import Connection
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.tenants import create_tenant
from tests.store.conftest import T0, ScheduleRow, add_due, insert_schedule
from tests.store.test_completions import write_together
from tests.store.test_runs import ok

pytestmark = pytest.mark.postgres

LEASE = 60_000


@pytest.fixture
def pgdb(pg_store_dsn: str) -> Iterator[PgDatabase]:
    store = PgDatabase.open(pg_store_dsn)
    yield store
    store.close()


def trips(db: PgDatabase, call: Callable[[], Any]) -> int:
    before = db.round_trips
    call()
    return db.round_trips - before


def _three_statements(conn: Connection) -> None:
    for _ in range(3):
        conn.execute("SELECT 1").fetchone()


def test_a_transaction_begins_with_its_first_statement_and_counts_its_commit(
    pgdb: PgDatabase,
) -> None:
    assert trips(pgdb, lambda: pgdb.write_now(_three_statements)) == 3 + 1
    assert trips(pgdb, lambda: pgdb.write_now(lambda conn: None)) == 0  # nothing to send


def _due(db: PgDatabase, count: int) -> None:
    tenant = db.write_now(create_tenant, name=f"t{count}", now=T0).tenant_id
    schedule = db.write_now(
        insert_schedule, tenant_id=tenant, row=ScheduleRow(cron="* * * * *"), now=T0
    )
    add_due(db, tenant, schedule, count=count, first_due=T0)


def _claim(db: PgDatabase, limit: int) -> int:
    batch = db.write_now(claim_runs, owner="inc_a", now=T0 + 3_600_000, lease_ms=LEASE, limit=limit)
    return len(batch.runs)


def test_a_claim_takes_the_round_trips_of_one_run_whatever_its_size(pgdb: PgDatabase) -> None:
    _due(pgdb, 1)
    one = trips(pgdb, lambda: _claim(pgdb, 1))
    _due(pgdb, 30)
    many = trips(pgdb, lambda: _claim(pgdb, 30))
    # BEGIN with the lock of the waiting tenants; the overlap gate; the waiting tenants;
    # the claim with its attempts and details; the secrets; the tenants still waiting;
    # COMMIT
    assert one == many == 7


async def test_outcomes_that_finish_together_take_the_round_trips_of_one(
    pgdb: PgDatabase,
) -> None:
    """Twelve successes queued behind a batch in flight are one transaction of the same
    round trips as one success alone (not twelve transactions)."""
    _due(pgdb, 13)
    runs = pgdb.write_now(
        claim_runs, owner="inc_a", now=T0 + 3_600_000, lease_ms=LEASE, limit=13
    ).runs
    done = [Finished(run, ok(), T0 + 3_601_000) for run in runs]
    alone = trips(pgdb, lambda: pgdb.write_now(complete_runs, done[:1]))
    before, commits = pgdb.round_trips, pgdb.commits
    assert await write_together(pgdb, done[1:]) == [True] * 12  # type: ignore[arg-type]
    assert pgdb.commits == commits + 2  # the holding batch's, then the twelve's
    assert pgdb.round_trips - before == 0 + alone  # the holding batch sends nothing


def test_the_outcomes_of_a_batch_are_one_statement_per_table(pgdb: PgDatabase) -> None:
    """The server executes the runs' and the attempts' updates (``UPDATE … FROM
    unnest``) and the events' insert (``INSERT … SELECT unnest``) once for the batch:
    twelve outcomes cost the statements and round trips of one."""
    _due(pgdb, 13)
    runs = pgdb.write_now(
        claim_runs, owner="inc_a", now=T0 + 3_600_000, lease_ms=LEASE, limit=13
    ).runs
    done = [Finished(run, ok(), T0 + 3_601_000) for run in runs]
    before, trips_before = pgdb.statements, pgdb.round_trips
    pgdb.write_now(complete_runs, done[:1])
    alone, alone_trips = pgdb.statements - before, pgdb.round_trips - trips_before
    before, trips_before = pgdb.statements, pgdb.round_trips
    assert pgdb.write_now(complete_runs, done[1:]) == [True] * 12
    assert pgdb.statements - before == alone
    assert pgdb.round_trips - trips_before == alone_trips
