"""Numbered PostgreSQL migrations (``postgres/migrations/NNNN_name.sql``).

Version N here means what version N means for SQLite (:mod:`appliance.store.infra.migrate`):
the same tables, columns and indexes, in PostgreSQL's types. The version lives in the
one-row table ``steeple_schema``. The pending files are applied in one transaction with
the version bump (PostgreSQL's DDL is transactional: a crash leaves the version before),
under a lock on that table, so replicas starting together migrate once.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import TYPE_CHECKING, Any

from appliance.errors import StoreError

if TYPE_CHECKING:
    import psycopg

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str]]:
    """Every bundled PostgreSQL migration as ``(number, sql)``, in order."""
    folder = resources.files("appliance.store.infra.postgres").joinpath("migrations")
    found = sorted(
        (int(m.group(1)), entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if (m := _NAME.match(entry.name))
    )
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise StoreError(f"migrations must be numbered 1..N without gaps, found {numbers}")
    return found


def current_version(raw: psycopg.Connection[Any]) -> int:
    """The schema version of the database ``raw`` is connected to (0: none yet)."""
    exists = raw.execute("SELECT to_regclass('steeple_schema') IS NOT NULL").fetchone()
    if not (exists and exists[0]):
        return 0
    row = raw.execute("SELECT version FROM steeple_schema").fetchone()
    return int(row[0]) if row else 0


def migrate(raw: psycopg.Connection[Any]) -> int:
    """Apply pending migrations on ``raw`` (an autocommit connection); return the version.
    Refuses a database a newer Steeple has migrated."""
    available = migrations()
    raw.execute("BEGIN")
    try:
        raw.execute("CREATE TABLE IF NOT EXISTS steeple_schema (version INTEGER NOT NULL)")
        raw.execute("LOCK TABLE steeple_schema IN ACCESS EXCLUSIVE MODE")
        row = raw.execute("SELECT version FROM steeple_schema").fetchone()
        if row is None:
            raw.execute("INSERT INTO steeple_schema (version) VALUES (0)")
        version = 0 if row is None else int(row[0])
        if version > len(available):
            raise StoreError(
                f"database schema version {version} is newer than this Steeple (knows"
                f" {len(available)}): install the Steeple that wrote it"
            )
        for number, sql in available[version:]:
            raw.execute(sql.encode())  # several statements: the simple query protocol
            raw.execute("UPDATE steeple_schema SET version = %s", (number,))
        raw.execute("COMMIT")
    except BaseException:
        raw.execute("ROLLBACK")
        raise
    return current_version(raw)
