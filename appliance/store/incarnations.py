"""Incarnations: one row per process start (ADR 0033 "Reclaim").

An incarnation's id is the ``lease_owner`` of every run it claims; at boot the new
incarnation takes back what earlier ones left ``running`` (``store.reclaim.reclaim_previous``).
A running incarnation marks itself seen every few seconds (:func:`mark_seen`), so the next
start can tell when one that died without a clean end stopped (:func:`previous_incarnation`,
read before the boot reclaim marks it ended).
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.core.ids import new_id
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection, read_committed


@dataclass(frozen=True, slots=True, kw_only=True)
class PreviousIncarnation:
    """The process that ran before this one, as it left its row."""

    id: str
    started_at: int
    ended_at: int | None  # set by a clean shutdown
    last_seen_at: int | None  # its last liveness mark
    last_finished_at: int | None = None  # the last run any process finished (a busy one's
    # last sign of life: later than its liveness mark, by up to an interval)

    @property
    def stopped_at(self) -> int:
        """When it stopped: its clean end, else the last sign of life it left."""
        if self.ended_at is not None:
            return self.ended_at
        signs = (self.started_at, self.last_seen_at or 0, self.last_finished_at or 0)
        return max(signs)


def register_incarnation(conn: Connection, *, pid: int, now: int) -> str:
    """Record this process start; returns its ``inc_`` id (the lease owner)."""
    incarnation_id = new_id("inc", now)
    conn.execute(
        "INSERT INTO incarnations (id, pid, started_at, last_seen_at) VALUES (?, ?, ?, ?)",
        (incarnation_id, pid, now, now),
    )
    return incarnation_id


def previous_incarnation(conn: Connection, *, incarnation_id: str) -> PreviousIncarnation | None:
    """The latest incarnation before ``incarnation_id`` (None on a first start). Read it
    before this one finishes any run: the last finished run is the previous one's."""
    row = conn.execute(
        "SELECT id, started_at, ended_at, last_seen_at FROM incarnations WHERE id != ?"
        " ORDER BY started_at DESC, id DESC LIMIT 1",
        (incarnation_id,),
    ).fetchone()
    if row is None:
        return None
    inc_id, started_at, ended_at, last_seen_at = row
    return PreviousIncarnation(
        id=str(inc_id),
        started_at=int(started_at),
        ended_at=rows.optional_integer(ended_at),
        last_seen_at=rows.optional_integer(last_seen_at),
        last_finished_at=rows.optional_integer(next(iter(conn.execute(_LAST_FINISHED)))[0]),
    )


# One probe of ``job_runs_tenant_finished`` per tenant and finished state (the expression
# and condition are the index's); a tenant's newest of its four states.
_LAST_FINISHED = (
    "SELECT max((SELECT max(COALESCE(r.finished_at, r.updated_at)) FROM job_runs r"
    " WHERE r.tenant_id = t.id AND r.state IN ('cancelled', 'failed', 'missed', 'succeeded')))"
    " FROM tenants t"
)


@read_committed
def mark_seen(conn: Connection, *, incarnation_id: str, now: int) -> None:
    """This incarnation is alive at ``now``. ``READ COMMITTED``: one row, its own."""
    conn.execute(
        "UPDATE incarnations SET last_seen_at = ? WHERE id = ?",
        (now, incarnation_id),
    )


def end_incarnation(conn: Connection, *, incarnation_id: str, now: int) -> None:
    """Mark a clean shutdown."""
    conn.execute(
        "UPDATE incarnations SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
        (now, incarnation_id),
    )


def record_check(conn: Connection, *, incarnation_id: str, now: int) -> None:
    """The database check of this process start passed at ``now``."""
    conn.execute("UPDATE incarnations SET checked_at = ? WHERE id = ?", (now, incarnation_id))


def last_check(conn: Connection) -> int | None:
    """When a database check last passed, or None (never recorded)."""
    row = conn.execute("SELECT max(checked_at) FROM incarnations").fetchone()
    return None if row is None or row[0] is None else int(row[0])
