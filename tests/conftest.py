"""Shared fixtures: real SQLite files in tmp_path, the conformance vectors, a throwaway
PostgreSQL server."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.store.infra.database import Database
from tests import postgres_cluster
from tests.chaos.recorder import FIGURES
from tests.postgres_cluster import Cluster

ROOT = Path(__file__).resolve().parent.parent  # the checkout
VECTORS_PATH = Path(__file__).parent / "vectors" / "delivery-contract.json"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The chaos figures an xdist worker published (tests/chaos/conftest.py)."""
    FIGURES.extend(getattr(node, "workeroutput", {}).get("chaos_figures", []))


@pytest.fixture(autouse=True)
def _outside_the_repository(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test, and every process it starts, runs in a fresh temporary working
    directory: a relative path written by mistake lands there, never in the repository
    (a test run leaves `git status` clean)."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    # ... where `python -m bench.…` and `tests.…` still import from the checkout
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))


@pytest.fixture(scope="session")
def vectors() -> dict[str, Any]:
    return json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


# The suites that take `db` from here; with STEEPLE_TEST_DATABASE=both each of their tests
# (but the `slow` ones, which start appliances on data directories of their own) runs on
# SQLite and on PostgreSQL, in one session: scripts/check's full gate.
BOTH_STORES_SUITES = ("tests/api/", "tests/ui/", "tests/engine/")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if os.environ.get("STEEPLE_TEST_DATABASE") != "both" or "db" not in metafunc.fixturenames:
        return
    where = Path(str(metafunc.definition.path)).resolve().relative_to(ROOT).as_posix()
    if where.startswith(BOTH_STORES_SUITES) and not metafunc.definition.get_closest_marker("slow"):
        twin = [pytest.mark.postgres, pytest.mark.postgres_twin]
        stores = ["sqlite", pytest.param("postgresql", marks=twin)]
        metafunc.parametrize("db", stores, indirect=True)


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session (per xdist worker), closed: its WAL is
    checkpointed into it and removed. :func:`fresh_sqlite` copies it for each test."""
    path = tmp_path_factory.mktemp("migrated") / "steeple.db"
    Database.open(path).close()
    return path


@pytest.fixture
def fresh_sqlite(tmp_path: Path, migrated_sqlite: Path) -> Path:
    """``tmp_path/steeple.db``: a migrated database file of this test's own, private
    (``0600``) as ``Database.open`` creates one — the bytes of :func:`migrated_sqlite`,
    so each test does not apply every migration again."""
    path = tmp_path / "steeple.db"
    shutil.copyfile(migrated_sqlite, path)
    path.chmod(0o600)
    return path


@pytest.fixture
def db(fresh_sqlite: Path, request: pytest.FixtureRequest) -> Iterator[Database]:
    """A migrated database file, threaded like production. On PostgreSQL instead — a
    fresh database — when ``STEEPLE_TEST_DATABASE=postgresql`` is in the environment, or
    for the PostgreSQL half of ``STEEPLE_TEST_DATABASE=both`` (above); the store suite runs
    on both always (tests/store/conftest.py)."""
    store_kind = getattr(request, "param", None) or os.environ.get("STEEPLE_TEST_DATABASE")
    if store_kind == "postgresql":
        from appliance.store.infra.postgres.database import PgDatabase

        store = PgDatabase.open(request.getfixturevalue("pg_store_dsn"))
        yield store  # type: ignore[misc]  # the same surface (store/infra/backend.py Store)
        store.close()
        return
    database = Database.open(fresh_sqlite)
    yield database
    database.close()


@pytest.fixture
def inline_db(fresh_sqlite: Path) -> Iterator[Database]:
    """The same database, but calls run inline (for engine tests under MockClock autojump)."""
    database = Database.open(fresh_sqlite, threaded=False)
    yield database
    database.close()


# A throwaway PostgreSQL server (tests/postgres_cluster.py), shared by the session; each
# test that asks for `pg_dsn` gets a database of its own. Where PostgreSQL cannot run the
# tests skip with PG_SKIP and the reason, and the run lists them at the end: never silently.
PG_SKIP = postgres_cluster.SKIP_PREFIX


@pytest.fixture(scope="session")
def pg_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    problem = postgres_cluster.unavailable()
    if problem:
        pytest.skip(PG_SKIP + problem)
    cluster = postgres_cluster.start_cluster(tmp_path_factory.mktemp("pg"))
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_dsn(pg_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database of its own for this test: its superuser DSN."""
    name = pg_cluster.next_database_name(request.node.name)
    dsn = pg_cluster.create_database(name)
    yield dsn
    pg_cluster.drop_database(name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the server is marked `postgres` (`-m "not postgres"` leaves it)."""
    for item in items:
        if "pg_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The chaos suite's lines of figures (tests/chaos/recorder.py), one per scenario;
    then what is missing and every test it kept from running (-ra folds them into one
    line: the fixture's)."""
    if FIGURES:
        terminalreporter.section("chaos figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
    skipped = [
        (report.nodeid, report.longrepr[2])
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and PG_SKIP in report.longrepr[2]
    ]
    if not skipped:
        return
    reason = skipped[0][1].split(PG_SKIP, 1)[1]
    terminalreporter.section("PostgreSQL missing: its tests did not run", yellow=True)
    terminalreporter.line(f"missing: {reason}")
    terminalreporter.line(f"skipped {len(skipped)} test(s):")
    for nodeid, _ in skipped:
        terminalreporter.line(f"  {nodeid}")


@pytest.fixture(scope="session")
def pg_store_template(pg_cluster: Cluster) -> str:
    """A database migrated once, that :func:`pg_store_dsn` copies for each test."""
    from appliance.store.infra.postgres.database import PgDatabase

    name = "steeple_migrated"
    PgDatabase.open(pg_cluster.create_database(name), pool_size=1).close()
    return name


@pytest.fixture
def pg_store_dsn(
    pg_cluster: Cluster, pg_store_template: str, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test (a copy of the template)."""
    name = pg_cluster.next_database_name(request.node.name)
    dsn = pg_cluster.create_database(name, template=pg_store_template)
    yield dsn
    pg_cluster.drop_database(name)
