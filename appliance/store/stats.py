"""Read-only figures about the database for operators: the boot-time destination audit,
``steeple status`` and ``/metrics``. Each query is one short read over indexed columns or
the whole of a small table; none takes a per-schedule or per-run parameter."""

from __future__ import annotations

import apsw


def active_targets(conn: apsw.Connection, *, limit: int = 10_000) -> list[tuple[str, int]]:
    """(target URL, active schedules using it): live, unpaused, with a next occurrence."""
    rows = conn.execute(
        "SELECT target_url, count(*) FROM schedules WHERE deleted_at IS NULL AND paused = 0"
        " AND next_fire_at IS NOT NULL GROUP BY target_url ORDER BY count(*) DESC LIMIT ?",
        (limit,),
    )
    return [(str(url), int(count)) for url, count in rows]
