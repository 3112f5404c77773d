"""The overlap gate: what an occurrence due while an earlier run of its schedule is still
open becomes (docs/schedules.md, "Overlap"). It runs at the start of every claim, in the
claim's transaction, so what it decides and what the claim takes are one consistent view.

Rules this module guards:

- Only runs materialised for a schedule whose ``overlap`` is ``skip`` or ``buffer_one``
  carry the policy (``job_runs.overlap``); the gate reads the open ones through the
  partial index ``job_runs_overlap_open``, so its cost follows those runs alone.
- A schedule is *busy* while one of its gated runs is ``running`` or ``retry_wait``, or is
  a tenant's replay waiting to run (``pending`` with attempts behind it). Manual triggers
  and replays are the tenant's explicit requests: never skipped.
- The occurrences that have *come* (``scheduled_for <= now``, pending, never attempted)
  are taken oldest first. ``skip`` lets one through only when the schedule is not busy;
  ``buffer_one`` lets one more wait. A due occurrence beyond that is **skipped**: the row
  becomes ``missed`` (transition ``skip``) with ``failure_reason = 'overlap'``, and a
  ``schedule.run.missed`` event with reason ``overlap`` is written with it — never a silent
  drop. The row stays, so the unique index still holds the occurrence.
- A waiting occurrence is held back from the claim by moving its ``due_at`` :data:`HOLD_MS`
  ahead (ADR 0033: only ``due_at`` moves, never ``scheduled_for`` or the key); each time
  it comes due the gate looks again, so it starts at most that long after the schedule
  stops being busy.
- So ``skip`` never has two runs of a schedule open for delivery at once, and
  ``buffer_one`` at most one running and one waiting.
"""

from __future__ import annotations

import itertools
from typing import Final, NamedTuple

from appliance.core.events import EventType
from appliance.core.instants import format_scheduled_for
from appliance.core.runs import RunState, Transition, check_transition, sources
from appliance.core.schedules import Overlap
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection, Sql

HOLD_MS: Final = 1_000
OVERLAP_REASON: Final = "overlap"
_SKIP_FROM: Final = ", ".join(f"'{state.value}'" for state in sources(Transition.SKIP))
_SKIPPED: Final = check_transition(RunState.PENDING, Transition.SKIP).value


class _Open(NamedTuple):
    id: str
    tenant_id: str
    schedule_id: str
    scheduled_for: int
    due_at: int
    state: str
    attempt: int
    overlap: str


# SQLite is told the partial index; PostgreSQL's planner picks its own.
_OPEN_OVERLAPS: Final = Sql(sqlite="job_runs INDEXED BY job_runs_overlap_open", postgres="job_runs")


def gate_overlaps(conn: Connection, *, now: int) -> int:
    """Skip or hold the come occurrences of busy schedules (see the module's rules);
    returns how many were skipped."""
    found = [
        _Open(*row)
        for row in conn.execute(
            "SELECT id, tenant_id, schedule_id, scheduled_for, due_at, state, attempt, overlap"
            f" FROM {_OPEN_OVERLAPS.on(conn)} WHERE overlap IS NOT NULL"
            " AND state IN ('pending', 'running', 'retry_wait')"
            " ORDER BY schedule_id, scheduled_for"
        )
    ]
    skipped = 0
    for _, runs in itertools.groupby(found, key=lambda run: run.schedule_id):
        skipped += _gate_schedule(conn, list(runs), now=now)
    return skipped


def _gate_schedule(conn: Connection, runs: list[_Open], *, now: int) -> int:
    busy = any(run.state != RunState.PENDING or run.attempt > 0 for run in runs)
    come = [
        r for r in runs if r.state == RunState.PENDING and not r.attempt and r.scheduled_for <= now
    ]
    if not come:
        return 0
    waiters = 1 if Overlap(come[0].overlap) is Overlap.BUFFER_ONE else 0
    allowed = waiters if busy else waiters + 1
    skipped = 0
    for index, run in enumerate(come):
        if run.due_at > now:
            continue  # not due yet (jitter): judged when it is
        if index >= allowed:
            _skip(conn, run, now=now)
            skipped += 1
        elif busy or index >= 1:  # the one waiting behind a run still open
            conn.execute(
                "UPDATE job_runs SET due_at = ?, updated_at = ? WHERE id = ? AND state = 'pending'",
                (now + HOLD_MS, now, run.id),
            )
    return skipped


def _skip(conn: Connection, run: _Open, *, now: int) -> None:
    conn.execute(
        f"UPDATE job_runs SET state = '{_SKIPPED}', failure_reason = ?, finished_at = ?,"
        f" updated_at = ? WHERE id = ? AND state IN ({_SKIP_FROM})",
        (OVERLAP_REASON, now, now, run.id),
    )
    append_event(
        conn,
        tenant_id=run.tenant_id,
        type=EventType.RUN_MISSED,
        now=now,
        schedule_id=run.schedule_id,
        run_id=run.id,
        data={"scheduled_for": format_scheduled_for(run.scheduled_for), "reason": OVERLAP_REASON},
    )
