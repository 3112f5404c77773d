"""The database engine's own facts, for ``steeple doctor`` and the ``/metrics`` info:
its library version, its journal mode and its quick check. (What the database holds —
queue, rates, sizes — is the operator's figures: :mod:`appliance.store.figures.operator`.)
"""

from __future__ import annotations

import apsw

from appliance.store.infra.connection import Connection


def sqlite_version() -> str:
    return apsw.sqlite_lib_version()


def journal_mode(conn: Connection) -> str:
    row = conn.execute("PRAGMA journal_mode").fetchone()
    return "unknown" if row is None else str(row[0])


def quick_check(conn: Connection) -> list[str]:
    """``PRAGMA quick_check``: ``["ok"]`` or the first problems found."""
    return [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
