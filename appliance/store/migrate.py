"""Numbered SQL migrations (``migrations/NNNN_name.sql``) tracked by ``PRAGMA user_version``.

Each file is applied once, in order, in its own ``BEGIN IMMEDIATE`` transaction together
with the ``user_version`` bump, so a crash mid-migration leaves the previous version intact.
"""

from __future__ import annotations

import re
from importlib import resources

import apsw

from appliance.errors import StoreError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str]]:
    """Every bundled migration as ``(number, sql)``, in order."""
    found = []
    for entry in resources.files("appliance.store").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise StoreError(f"migrations must be numbered 1..N without gaps, found {numbers}")
    return found


def current_version(conn: apsw.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: apsw.Connection) -> int:
    """Apply pending migrations; return the resulting version. Refuses a newer database."""
    available = migrations()
    version = current_version(conn)
    if version > len(available):
        raise StoreError(
            f"database schema version {version} is newer than this Steeple "
            f"(knows {len(available)}): upgrade Steeple or restore a backup"
        )
    for number, sql in available[version:]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return current_version(conn)
