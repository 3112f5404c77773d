"""The operator's health figures, computed in one place for their three faces: the
operator page ``/admin/health``, ``GET /metrics`` and ``steeple status``
(docs/operations.md, "What to monitor").

One call reads everything in one snapshot: the gauges of :func:`appliance.store.stats.health`
(open runs and planner lag from partial indexes), the recent rates — runs delivered and
failed per minute and the dispatch lateness p50/p99 of runs finished at their first
attempt, over the last ``WINDOW_MS`` (the newest ``LATENESS_SAMPLE`` of them) — the clock
jumps of the last day, the database and WAL sizes, the free disk, the last database check
and the last backup. Each query reads an index range bounded by time
(``job_runs_tenant_finished``, ``job_runs_finished``, ``events_tenant_type``), so the cost
follows the recent rate, not the history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from appliance.store.events import SYSTEM_TENANT
from appliance.store.incarnations import last_check
from appliance.store.infra.connection import Connection, Sql
from appliance.store.infra.disk import Disk
from appliance.store.stats import Health, health

WINDOW_MS: Final = 5 * 60_000  # the rates and the lateness percentiles look this far back
JUMP_WINDOW_MS: Final = 86_400_000
LATENESS_SAMPLE: Final = 1_000  # newest first-attempt runs the percentiles are taken over


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    health: Health
    db_bytes: int
    wal_bytes: int
    free_disk_bytes: int | None  # on the data directory's file system (None: PostgreSQL's)
    last_backup_ms: int | None
    last_check_ms: int | None  # the last database check (quick_check at boot) that passed
    delivered_per_minute: float  # runs succeeded, over the last WINDOW_MS
    failed_per_minute: float  # runs failed, over the last WINDOW_MS
    lateness_p50_ms: int | None  # first attempt's start − due_at; None: no run finished
    lateness_p99_ms: int | None
    clock_jumps_24h: int


def operator_figures(conn: Connection, *, disk: Disk, now: int) -> Figures:
    """The operator's figures; the store's size, WAL, free space and last backup as its
    ``disk`` says them (:mod:`appliance.store.infra.disk`)."""
    delivered, failed = _finished_counts(conn, since=now - WINDOW_MS)
    lateness = _lateness(conn, since=now - WINDOW_MS)
    minutes = WINDOW_MS / 60_000
    state = health(conn, now=now)
    return Figures(
        health=state,
        db_bytes=disk.db_bytes(state.page_size * state.page_count),
        wal_bytes=disk.wal_bytes(),
        free_disk_bytes=disk.free_bytes(),
        last_backup_ms=disk.last_backup_ms(),
        last_check_ms=last_check(conn),
        delivered_per_minute=round(delivered / minutes, 2),
        failed_per_minute=round(failed / minutes, 2),
        lateness_p50_ms=percentile(lateness, 50),
        lateness_p99_ms=percentile(lateness, 99),
        clock_jumps_24h=_clock_jumps(conn, since=now - JUMP_WINDOW_MS),
    )


def percentile(values: list[int], p: int) -> int | None:
    """The nearest-rank ``p``th percentile of ``values`` (sorted), or None when empty."""
    if not values:
        return None
    rank = max(1, -(-p * len(values) // 100))  # ceil(p/100 · n)
    return values[rank - 1]


# SQLite is told the index (as overview's counts are); PostgreSQL's planner picks its own.
_TENANT_FINISHED: Final = Sql(
    sqlite="job_runs INDEXED BY job_runs_tenant_finished", postgres="job_runs"
)


def _finished_counts(conn: Connection, *, since: int) -> tuple[int, int]:
    """Runs succeeded and failed since ``since``: index entries only (one range of
    ``job_runs_tenant_finished`` per tenant and state)."""
    sql = (
        f"SELECT count(*) FROM {_TENANT_FINISHED.on(conn)} WHERE state IN"
        " ('cancelled', 'failed', 'missed', 'succeeded')"
        " AND tenant_id IN (SELECT id FROM tenants) AND state = ?"
        " AND COALESCE(finished_at, updated_at) >= ?"
    )
    counted = []
    for state in ("succeeded", "failed"):
        row = conn.execute(sql, (state, since)).fetchone()
        counted.append(0 if row is None else int(row[0]))
    return counted[0], counted[1]


def _lateness(conn: Connection, *, since: int) -> list[int]:
    """The lateness of the newest runs finished (succeeded or failed) at their first
    attempt, sorted — the rule :mod:`appliance.store.observed` counts for the histogram."""
    rows = conn.execute(
        "SELECT a.started_at - r.due_at FROM job_runs r"
        " JOIN attempts a ON a.run_id = r.id AND a.attempt = 1"
        " WHERE r.state IN ('cancelled', 'failed', 'missed', 'succeeded')"  # the index's
        " AND r.state IN ('succeeded', 'failed') AND r.attempt = 1"
        " AND COALESCE(r.finished_at, r.updated_at) >= ?"
        " ORDER BY COALESCE(r.finished_at, r.updated_at) DESC LIMIT ?",
        (since, LATENESS_SAMPLE),
    )
    return sorted(max(0, int(str(late))) for (late,) in rows)


def _clock_jumps(conn: Connection, *, since: int) -> int:
    total = 0
    for occurred_at, data in conn.execute(
        "SELECT occurred_at, data FROM events WHERE tenant_id = ? AND type = ? ORDER BY seq DESC",
        (SYSTEM_TENANT, "clock.jump_detected"),
    ):
        if int(str(occurred_at)) < since:
            break
        fields = json.loads(str(data)) if data else {}
        total += int(fields.get("count", 1))
    return total
