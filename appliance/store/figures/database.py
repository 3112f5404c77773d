"""The database engine's own facts, for ``steeple doctor`` and the ``/metrics`` info:
its library version, its journal mode and its quick check. (What the database holds —
queue, rates, sizes — is the operator's figures: :mod:`appliance.store.figures.operator`.)
"""

from __future__ import annotations

from typing import Final

import apsw

from appliance.store.infra.connection import Connection, Sql

_JOURNAL_MODE: Final = Sql(sqlite="PRAGMA journal_mode", postgres="SELECT 'postgresql'")


def sqlite_version() -> str:
    return apsw.sqlite_lib_version()


def journal_mode(conn: Connection) -> str:
    row = conn.execute(_JOURNAL_MODE.on(conn)).fetchone()
    return "unknown" if row is None else str(row[0])


def quick_check(conn: Connection) -> list[str]:
    """``PRAGMA quick_check``: ``["ok"]`` or the first problems found."""
    return [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
