"""The overlap gate: applies what :func:`appliance.core.overlap.gate` decides about the
occurrences due while an earlier run of their schedule is still open (docs/schedules.md,
"Overlap"). It runs at the start of every claim, in the claim's transaction, so what it
decides and what the claim takes are one consistent view.

Rules this module guards:

- Only runs materialised for a schedule whose ``overlap`` is ``skip`` or ``buffer_one``
  carry the policy (``job_runs.overlap``); the gate reads the open ones through the
  partial index ``job_runs_overlap_open``, so its cost follows those runs alone.
- A skipped occurrence's row becomes ``missed`` (transition ``skip``) with
  ``failure_reason = 'overlap'``, and a ``schedule.run.missed`` event with reason
  ``overlap`` is written with it — never a silent drop. The row stays, so the unique index
  still holds the occurrence.
- A held occurrence's ``due_at`` moves :data:`~appliance.core.overlap.HOLD_MS` ahead, and
  only while it is still ``pending``: the claim does not take it before it is due again.
"""

from __future__ import annotations

import itertools
from typing import Final, NamedTuple

from appliance.core.events import EventType
from appliance.core.instants import format_scheduled_for
from appliance.core.overlap import HOLD_MS, OVERLAP_REASON, Gate, gate
from appliance.core.runs import RunState, Transition, check_transition, sources
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection, Sql

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
    skipped = 0
    for run, verdict in gate(runs, now=now):
        if verdict is Gate.SKIP:
            _skip(conn, run, now=now)
            skipped += 1
        elif verdict is Gate.HOLD:
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
