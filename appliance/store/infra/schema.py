"""The schema version a database is at and the one this Steeple needs, on either store.

SQLite keeps the version in ``PRAGMA user_version`` (:mod:`appliance.store.infra.migrate`),
PostgreSQL in the one-row table ``steeple_schema``
(:mod:`appliance.store.infra.postgres.migrate`); version N means the same on both.
"""

from __future__ import annotations

from typing import Final

from appliance.store.infra import migrate
from appliance.store.infra.connection import Connection, on_sqlite
from appliance.store.infra.postgres import migrate as pg_migrate

_PG_HAS_TABLE: Final = "SELECT to_regclass('steeple_schema') IS NOT NULL"


def schema_version(conn: Connection) -> int:
    """The version ``conn``'s database is migrated to (0: not yet)."""
    if on_sqlite(conn):
        row = conn.execute("PRAGMA user_version").fetchone()
    else:
        exists = conn.execute(_PG_HAS_TABLE).fetchone()
        if not (exists and exists[0]):
            return 0
        row = conn.execute("SELECT version FROM steeple_schema").fetchone()
    return int(row[0]) if row else 0


def needed_version(conn: Connection) -> int:
    """The version this Steeple's bundled migrations for ``conn``'s store end at."""
    return len(migrate.migrations() if on_sqlite(conn) else pg_migrate.migrations())
