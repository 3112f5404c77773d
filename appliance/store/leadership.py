"""The replicas' leader: one row, a term renewed against the shared clock.

On PostgreSQL several replicas run the same services. The planner, reaper and pruner
need to run on one of them only: the others would find their work done, at the price of
serialization conflicts (docs/adr/0044-postgresql-store.md). This is an optimisation, not
a lock. Two replicas that both think they lead, or none, still plan each occurrence once,
because the unique index and the cursor's compare-and-set decide, not the leader.

- :func:`lead` takes the row when it is free or its term lapsed, or renews it for its
  holder. The term's start (``elected_at``) is kept across renewals.
- :func:`resign` frees it at once, on a clean shutdown.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.store.infra.connection import Connection, read_committed


@dataclass(frozen=True, slots=True, kw_only=True)
class Term:
    holder: str
    elected_at: int
    expires_at: int

    def held_by(self, incarnation_id: str, *, now: int) -> bool:
        return self.holder == incarnation_id and now < self.expires_at


@read_committed
def lead(conn: Connection, *, incarnation_id: str, now: int, term_ms: int) -> Term:
    """Take or renew the leadership for ``incarnation_id`` if it is free, lapsed or
    already its own; the term that holds afterwards (maybe another replica's).
    ``READ COMMITTED``: the upsert locks the row and checks its condition on the row as
    it is; the read after it sees the term that committed."""
    conn.execute(
        "INSERT INTO leader (id, holder, elected_at, expires_at) VALUES (1, :me, :now, :until)"
        " ON CONFLICT (id) DO UPDATE SET holder = excluded.holder,"
        " elected_at = CASE WHEN leader.holder = excluded.holder THEN leader.elected_at"
        " ELSE excluded.elected_at END, expires_at = excluded.expires_at"
        " WHERE leader.holder = excluded.holder OR leader.expires_at <= :now",
        {"me": incarnation_id, "now": now, "until": now + term_ms},
    )
    holder, elected_at, expires_at = conn.execute(
        "SELECT holder, elected_at, expires_at FROM leader WHERE id = 1"
    ).fetchone()
    return Term(holder=str(holder), elected_at=int(elected_at), expires_at=int(expires_at))


def resign(conn: Connection, *, incarnation_id: str) -> bool:
    """Give the leadership up, if ``incarnation_id`` holds it; whether it did."""
    conn.execute("DELETE FROM leader WHERE holder = ?", (incarnation_id,))
    return conn.changes() > 0
