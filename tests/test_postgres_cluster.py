"""tests/postgres_cluster.py: finding the server binaries (or saying precisely why not),
and a database per test, cloned from a template when asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import postgres_cluster
from tests.postgres_cluster import Cluster

try:
    import psycopg
except ImportError:  # the pg_cluster fixture skips, naming what is missing
    psycopg = None


def test_a_bin_directory_without_the_server_is_refused_naming_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pg_ctl").write_text("#!/bin/sh\n")
    (tmp_path / "pg_ctl").chmod(0o755)
    monkeypatch.setenv(postgres_cluster.BIN_ENV, str(tmp_path))
    assert postgres_cluster.find_postgres_bin() == (
        None,
        f"${postgres_cluster.BIN_ENV}={tmp_path} has no initdb, postgres",
    )
    assert postgres_cluster.unavailable().endswith("has no initdb, postgres")


def test_a_database_of_its_own_and_a_clone_of_a_template(pg_cluster: Cluster) -> None:
    template = pg_cluster.next_database_name("Template: migrated!")
    assert template.endswith("_template_migrated")
    with psycopg.connect(pg_cluster.create_database(template), autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (n BIGINT)")
        conn.execute("INSERT INTO kept VALUES (7)")
    clone = pg_cluster.next_database_name("clone")
    with psycopg.connect(pg_cluster.create_database(clone, template=template)) as conn:
        assert conn.execute("SELECT n FROM kept").fetchall() == [(7,)]
        settings = conn.execute(
            "SELECT current_setting('max_connections'), current_setting('fsync'),"
            " current_setting('server_encoding'), current_setting('lc_collate')"
        ).fetchone()
    # fsync off: the suite kills processes, never the machine (tests/postgres_cluster.py).
    assert settings == (str(postgres_cluster.MAX_CONNECTIONS), "off", "UTF8", "C")
    pg_cluster.drop_database(clone)
    pg_cluster.drop_database(template)
    with psycopg.connect(pg_cluster.superuser_dsn) as conn:
        names = {name for (name,) in conn.execute("SELECT datname FROM pg_database")}
    assert not {clone, template} & names


@pytest.mark.postgres
def test_stop_ends_the_server_and_removes_its_files(tmp_path: Path) -> None:
    problem = postgres_cluster.unavailable()
    if problem:
        pytest.skip(postgres_cluster.SKIP_PREFIX + problem)
    cluster = postgres_cluster.start_cluster(tmp_path)
    with psycopg.connect(cluster.superuser_dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    cluster.stop()
    assert not cluster.root.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(cluster.superuser_dsn, connect_timeout=2)
