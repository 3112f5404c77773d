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
