"""A PostgreSQL store waits out a server restart instead of failing its callers
(store/postgres/database.py, "An outage is waited out"). On a server of its own, since it
stops it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.store.postgres.database import PgDatabase
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
