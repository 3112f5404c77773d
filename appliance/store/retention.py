"""Retention: what is deleted when it is old, and what never is (ADR 0033 "Storage").

Rules:
- Only *finished* runs go: succeeded, failed, missed or cancelled, ``finished_at`` (or,
  for a row that never finished, its ``updated_at``) older than the retention period —
  with their attempts. Open runs (pending, running, retry_wait) are never deleted.
- Events older than the retention period go too, and so do finished failure
  notifications (``store.notifications.prune_notifications``, from the pruner);
  idempotency records of API creates go after their own 24 h
  (``store.request_keys.prune_request_keys``); bodies no run refers to any more go last.
- The retention period is never shorter than the *dedupe horizon*: the catch-up window
  plus the longest retry span (7 d) — ``MIN_RETENTION_MS``. Inside the horizon a run's row
  is what tells a re-plan "this occurrence exists" (the unique index), so it must stay.
  Outside it, the forward-only cursor alone keeps the planner from planning it again.
- Work is bounded per call (``limit`` rows, each found through an index — including when
  none qualifies), so one pass never holds the writer long.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.core.runs import TERMINAL
from appliance.store.infra.connection import Connection, Sql

DAY_MS = 86_400_000
MAX_RETRY_SPAN_MS = 7 * DAY_MS  # ADR 0032: a retry window is at most 7 days
MAX_CATCHUP_WINDOW_MS = DAY_MS  # the largest catch-up window a schedule may have
MIN_RETENTION_MS = MAX_RETRY_SPAN_MS + MAX_CATCHUP_WINDOW_MS
_FINISHED_SQL = "(" + ", ".join(f"'{state.value}'" for state in sorted(TERMINAL)) + ")"
# One range of ``job_runs_tenant_finished`` per tenant and finished state (migration 0024):
# bounded work even when nothing is old enough — without an index this read all of
# job_runs, holding the writer. CROSS JOIN keeps the tenants outside, so each of their
# ranges is a seek (SQLite would otherwise walk that whole index once).
OLD_FINISHED_SQL = (
    "SELECT r.id, r.body_digest FROM tenants t CROSS JOIN job_runs r WHERE r.tenant_id = t.id"
    f" AND r.state IN {_FINISHED_SQL} AND COALESCE(r.finished_at, r.updated_at) < ? LIMIT ?"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pruned:
    runs: int
    attempts: int
    events: int
    bodies: int

    @property
    def rows(self) -> int:
        return self.runs + self.attempts + self.events + self.bodies


# This connection's own scratch table of the runs being pruned, in each store's words.
_CREATE_PRUNED: Final = Sql(
    sqlite="CREATE TEMP TABLE IF NOT EXISTS pruned_runs (id TEXT PRIMARY KEY, body_digest TEXT)"
    " WITHOUT ROWID",
    postgres="CREATE TEMP TABLE IF NOT EXISTS pruned_runs (id TEXT PRIMARY KEY, body_digest TEXT)",
)
_PRUNED: Final = Sql(sqlite="temp.pruned_runs", postgres="pg_temp.pruned_runs")


def prune(conn: Connection, *, now: int, retention_ms: int, limit: int) -> Pruned:
    """Delete up to ``limit`` finished runs (and their attempts) and up to ``limit`` events
    older than ``retention_ms``, then unreferenced bodies. Refuses a retention period
    shorter than the dedupe horizon."""
    if retention_ms < MIN_RETENTION_MS:
        raise ValueError(
            f"retention {retention_ms} ms is shorter than the dedupe horizon {MIN_RETENTION_MS} ms"
        )
    cutoff = now - retention_ms
    pruned = _PRUNED.on(conn)
    conn.execute(_CREATE_PRUNED.on(conn))
    conn.execute(f"DELETE FROM {pruned}")
    conn.execute(f"INSERT INTO {pruned} {OLD_FINISHED_SQL}", (cutoff, limit))
    conn.execute(f"DELETE FROM attempts WHERE run_id IN (SELECT id FROM {pruned})")
    attempts = conn.changes()
    conn.execute(f"DELETE FROM job_runs WHERE id IN (SELECT id FROM {pruned})")
    runs = conn.changes()
    conn.execute(
        "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE occurred_at < ?"
        " ORDER BY seq LIMIT ?)",
        (cutoff, limit),
    )
    events = conn.changes()
    conn.execute(  # only the pruned runs' bodies can have become orphans
        f"DELETE FROM bodies WHERE digest IN (SELECT body_digest FROM {pruned})"
        " AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.body_digest = bodies.digest)"
    )
    return Pruned(runs=runs, attempts=attempts, events=events, bodies=conn.changes())
