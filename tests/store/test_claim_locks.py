"""Each store's claims say what their store needs: on PostgreSQL the picks of the run claim
and of the notifier's claim lock their rows with SKIP LOCKED, so replicas claiming at once
pass over each other's rows instead of waiting (docs/adr/0044-postgresql-store.md); on
SQLite they carry no such clause (one writer). The plans are read from each database."""

from __future__ import annotations

import pytest

from appliance.store import claims, notifications
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import SKIP_LOCKED, Connection, row_locks
from appliance.store.infra.database import Database
from tests.store.conftest import T0

PARAMS = {"owner": "o", "now": T0, "expires": T0 + 30_000, "until": T0 + 30_000}
PARAMS |= {"limit": 8, "cap": 4, "tenant": "ten_x"}
CLAIMS = {
    "runs, contested": claims._CLAIM,
    "runs, one tenant": claims._CLAIM_ALONE,
    "notifications": notifications._CLAIM,
}


def plan(conn: Connection, statement: str) -> str:
    """The database's own plan for ``statement`` (executes nothing)."""
    used = {name: value for name, value in PARAMS.items() if f":{name}" in statement}
    explain = "EXPLAIN" if row_locks(conn) else "EXPLAIN QUERY PLAN"
    return "\n".join(str(row[-1]) for row in conn.execute(f"{explain} {statement}", used))


@pytest.mark.parametrize("claim", CLAIMS)
def test_a_claim_skips_locked_rows_on_postgresql_and_says_nothing_of_it_on_sqlite(
    db: Store, claim: str
) -> None:
    def check(conn: Connection) -> None:
        locks = row_locks(conn)
        statement = CLAIMS[claim].on(conn)
        said = plan(conn, statement)
        if isinstance(db, Database):
            assert locks == "" and "FOR UPDATE" not in statement
        else:
            assert locks == SKIP_LOCKED and SKIP_LOCKED in statement
            assert "LockRows" in said, said

    db.read_now(check)
