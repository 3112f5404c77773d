"""Incarnations: one row per process start (ADR 0033 "Reclaim").

An incarnation's id is the ``lease_owner`` of every run it claims; at boot the new
incarnation takes back what earlier ones left ``running`` (``store.reclaim.reclaim_previous``).
"""

from __future__ import annotations

import apsw

from appliance.core.ids import new_id


def register_incarnation(conn: apsw.Connection, *, pid: int, now: int) -> str:
    """Record this process start; returns its ``inc_`` id (the lease owner)."""
    incarnation_id = new_id("inc", now)
    conn.execute(
        "INSERT INTO incarnations (id, pid, started_at) VALUES (?, ?, ?)",
        (incarnation_id, pid, now),
    )
    return incarnation_id


def end_incarnation(conn: apsw.Connection, *, incarnation_id: str, now: int) -> None:
    """Mark a clean shutdown."""
    conn.execute(
        "UPDATE incarnations SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
        (now, incarnation_id),
    )


def record_check(conn: apsw.Connection, *, incarnation_id: str, now: int) -> None:
    """The database check of this process start passed at ``now``."""
    conn.execute("UPDATE incarnations SET checked_at = ? WHERE id = ?", (now, incarnation_id))


def last_check(conn: apsw.Connection) -> int | None:
    """When a database check last passed, or None (never recorded)."""
    row = conn.execute("SELECT max(checked_at) FROM incarnations").fetchone()
    return None if row is None or row[0] is None else int(row[0])
