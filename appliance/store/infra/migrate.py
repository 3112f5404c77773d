"""Numbered SQL migrations (``migrations/NNNN_name.sql``) tracked by ``PRAGMA user_version``.

Each file is applied once, in order, in its own ``BEGIN IMMEDIATE`` transaction together
with the ``user_version`` bump, so a crash mid-migration leaves the previous version intact.

A migration that existing data could make fail has a precondition here, checked inside
the same transaction first: it refuses with a message naming the rows and the fix, and
changes nothing (a constraint error from the SQL would name neither).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources

import apsw

from appliance.errors import StoreError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str]]:
    """Every bundled migration as ``(number, sql)``, in order."""
    found = []
    for entry in resources.files("appliance.store.infra").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise StoreError(f"migrations must be numbered 1..N without gaps, found {numbers}")
    return found


def pending(conn: apsw.Connection) -> list[int]:
    """The numbers of the migrations :func:`migrate` would apply (refuses a newer database)."""
    available = migrations()
    version = current_version(conn)
    _refuse_newer(version, len(available))
    return [number for number, _ in available[version:]]


def _refuse_newer(version: int, known: int) -> None:
    if version > known:
        raise StoreError(
            f"database schema version {version} is newer than this Steeple "
            f"(knows {known}): install the Steeple that wrote it, or restore the "
            'pre-migration snapshot (docs/operations.md, "Upgrade and rollback")'
        )


def _unique_tenant_names(conn: apsw.Connection) -> None:
    rows = conn.execute(
        "SELECT lower(name), group_concat(id || ' ' || quote(name), ', ') FROM tenants"
        " GROUP BY name COLLATE NOCASE HAVING count(*) > 1 ORDER BY 1"
    ).fetchall()
    if rows:
        listed = "; ".join(str(ids) for _, ids in rows)
        raise StoreError(
            f"tenant names must be unique, and these tenants share one: {listed}. Rename all"
            " but one of each (steeple tenant rename TENANT_ID NEW_NAME), then start again"
        )


PRECONDITIONS: dict[int, Callable[[apsw.Connection], None]] = {11: _unique_tenant_names}


def current_version(conn: apsw.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: apsw.Connection) -> int:
    """Apply pending migrations; return the resulting version. Refuses a newer database."""
    available = migrations()
    version = current_version(conn)
    _refuse_newer(version, len(available))
    for number, sql in available[version:]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if number in PRECONDITIONS:
                PRECONDITIONS[number](conn)
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return current_version(conn)
