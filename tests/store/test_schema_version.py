"""The schema version reads the same way on both stores: what readiness (``/readyz``),
``steeple doctor`` and ``steeple migrate`` compare with the bundled migrations."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.store.infra.backend import Store
from appliance.store.infra.database import Database
from appliance.store.infra.migrate import migrations
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.infra.schema import needed_version, schema_version


def test_a_migrated_store_is_at_the_version_it_needs(db: Store) -> None:
    assert db.read_now(schema_version) == db.read_now(needed_version) == len(migrations())


def test_an_unmigrated_sqlite_file_is_at_version_zero(tmp_path: Path) -> None:
    db = Database.open(tmp_path / "empty.db", migrate_schema=False, check=False)
    try:
        assert db.read_now(schema_version) == 0
    finally:
        db.close()


@pytest.mark.postgres
def test_an_unmigrated_postgres_database_is_at_version_zero(pg_dsn: str) -> None:
    db = PgDatabase.open(pg_dsn, migrate_schema=False)
    try:
        assert db.read_now(schema_version) == 0
        assert db.read_now(needed_version) == len(migrations())
    finally:
        db.close()
