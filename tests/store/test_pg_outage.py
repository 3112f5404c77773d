"""A PostgreSQL store waits out a server restart instead of failing its callers
(store/infra/postgres/database.py, "An outage is waited out"). On a server of its own, since it
stops it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from appliance.errors import StoreError
from appliance.store.infra.postgres.database import PgDatabase, _CommitLost
from appliance.store.infra.postgres.outage import Outage
from appliance.store.tenants import create_tenant, list_tenants
from tests.postgres_cluster import Cluster, start_cluster, unavailable
from tests.store.conftest import T0

pytestmark = pytest.mark.postgres


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Cluster]:
    if problem := unavailable():
        pytest.skip(problem)
    cluster = start_cluster(tmp_path)
    yield cluster
    cluster.stop()


def restart_later(cluster: Cluster, down_s: float) -> threading.Thread:
    """Stop the server now; start it again ``down_s`` later, on the same port."""
    cluster.pg_ctl("stop", "-m", "fast", "-w")

    def start() -> None:
        time.sleep(down_s)
        cluster.pg_ctl("start", "-w", "-l", str(cluster.log_file), "-o", f"-p {cluster.port}")

    thread = threading.Thread(target=start)
    thread.start()
    return thread


def test_a_write_during_a_restart_waits_and_commits_once(own_server: Cluster) -> None:
    db = PgDatabase.open(own_server.create_database("steeple"), pool_size=2)
    try:
        db.write_now(create_tenant, name="before", now=T0)  # the pool's connections are open
        restarting = restart_later(own_server, down_s=1.5)
        started = time.monotonic()
        db.write_now(create_tenant, name="during", now=T0 + 1)
        waited = time.monotonic() - started
        restarting.join()
        names = sorted(t.name for t in db.read_now(list_tenants))
        assert names == ["before", "during"]  # once: nothing was committed before the cut
        assert waited >= 1.0  # it did wait for the server
    finally:
        db.close()


def test_a_commit_that_loses_its_connection_is_looked_up_and_run_again_if_it_aborted(
    pg_store_dsn: str,
) -> None:
    """The server ends the backend inside the first COMMIT (a deferred trigger; a sequence,
    which no rollback undoes, makes it once): the commit's answer is lost, the store asks
    the server, learns the transaction aborted, and runs it again — one tenant."""
    with psycopg.connect(pg_store_dsn, autocommit=True) as admin:
        admin.execute("CREATE SEQUENCE commits_cut")
        admin.execute(
            "CREATE FUNCTION cut_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN IF nextval('commits_cut') = 1 THEN"
            "   PERFORM pg_terminate_backend(pg_backend_pid()); END IF;"
            " RETURN NULL; END $$"
        )
        admin.execute(
            "CREATE CONSTRAINT TRIGGER cut AFTER INSERT ON tenants"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION cut_commit()"
        )
    db = PgDatabase.open(pg_store_dsn, pool_size=2)
    try:
        db.write_now(create_tenant, name="once", now=T0)
        assert [t.name for t in db.read_now(list_tenants)] == ["once"]
        with psycopg.connect(pg_store_dsn, autocommit=True) as admin:
            (cuts,) = admin.execute("SELECT last_value FROM commits_cut").fetchone()  # type: ignore[misc]
        assert cuts == 2  # the first commit was cut, the second went through
    finally:
        db.close()


def test_what_became_of_a_transaction_is_the_servers_answer(pg_store_dsn: str) -> None:
    db = PgDatabase.open(pg_store_dsn, pool_size=2)
    try:
        with psycopg.connect(pg_store_dsn, autocommit=True) as raw:
            committed = raw.execute("BEGIN; SELECT txid_current()")
            committed.nextset()
            done = int(committed.fetchone()[0])  # type: ignore[index]
            raw.execute("COMMIT")
            aborted = raw.execute("BEGIN; SELECT txid_current()")
            aborted.nextset()
            undone = int(aborted.fetchone()[0])  # type: ignore[index]
            raw.execute("ROLLBACK")
        outage = Outage(pg_store_dsn)
        lost = OSError("lost")
        assert db._did_commit(_CommitLost(done, "result", lost), outage)
        assert not db._did_commit(_CommitLost(undone, "result", lost), outage)
    finally:
        db.close()


def test_a_closed_store_refuses_at_once_instead_of_waiting_out_an_outage(
    pg_store_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = PgDatabase.open(pg_store_dsn)
    db.close()
    with pytest.raises(StoreError, match="closed"):
        db.read_now(list_tenants)
    assert "unreachable; waiting" not in caplog.text  # no outage was waited for
