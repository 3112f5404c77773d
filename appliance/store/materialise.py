"""Inserting runs: the one batched insert behind the planner, a manual trigger and any
future producer of runs (ADR 0033 "Planning", ADR 0034, ADR 0037).

Rules this module guards:

- **One run per occurrence.** Every row is inserted ``ON CONFLICT DO NOTHING``: the
  unique ``(schedule_id, scheduled_for)`` decides, and so does the primary key, since
  its id and key derive from the schedule id and the canonical ``scheduled_for`` text
  (:func:`appliance.core.runs.occurrence_run`). A conflict is always "already there",
  whoever got there first.
- One prepared statement inserts a whole batch; callers learn which rows were actually
  inserted, so they count and announce only what they created. A conflict is rare (a
  racing planner, a manual trigger of the same occurrence), so the batch is first
  inserted without ``RETURNING`` (which costs a share of the insert: bench/HISTORY.md,
  "Planner, round two"), inside a savepoint: if the connection's change count says every row went
  in, they all did; if not, the savepoint is rolled back and the batch inserted again
  with ``RETURNING id``, which names the rows inserted.
- **Bodies** are fixed at materialisation and content-addressed: digest = sha256 hex of
  ``content_type + "\\0" + body``. A schedule's ``payload_template`` is rendered here, once
  per run (:func:`run_body_digest`), so every attempt sends the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from appliance.core.payload_template import render, run_values
from appliance.core.runs import TERMINAL, NewRun
from appliance.core.schedules import Schedule
from appliance.store.infra.connection import Connection

# NewRun's field names are the job_runs columns they fill, in order.
_INSERT: Final = (
    f"INSERT INTO job_runs ({', '.join(NewRun._fields)}, created_at, updated_at, finished_at)"
    f" VALUES ({', '.join('?' * (len(NewRun._fields) + 3))})"
    # Any unique index stops a row: its id is derived from the occurrence, so its primary
    # key and (schedule_id, scheduled_for) meet together — except on PostgreSQL, where a
    # racing replica's row can reach the primary key after this one checked the other.
    " ON CONFLICT DO NOTHING"
)
_INSERT_RETURNING: Final = _INSERT + " RETURNING id"


def insert_runs(conn: Connection, runs: Sequence[NewRun], *, now: int) -> set[str]:
    """Insert every run whose occurrence has none yet; the ids of those this call created.
    A row that meets the unique index (already planned, already triggered, or a racing
    planner got there first) is skipped."""
    if not runs:
        return set()
    params = [(*run, now, now, now if run.state in TERMINAL else None) for run in runs]
    # On an error the savepoint is left to the caller's transaction, which rolls back.
    conn.execute("SAVEPOINT insert_runs")
    # job_runs has no triggers: the change count is the rows this statement inserted.
    before = conn.total_changes()
    conn.executemany(_INSERT, params)
    if conn.total_changes() - before == len(params):
        created = {run.id for run in runs}
    else:  # some conflicted: insert again, learning which rows are new
        conn.execute("ROLLBACK TO insert_runs")
        # The statement runs row by row as its RETURNING rows are read: read them all.
        created = {run_id for (run_id,) in conn.executemany(_INSERT_RETURNING, params)}
    conn.execute("RELEASE insert_runs")
    return created


def store_body(conn: Connection, *, content_type: str, body: bytes) -> str:
    """Store body bytes once; returns their digest."""
    digest = hashlib.sha256(content_type.encode("utf-8") + b"\0" + body).hexdigest()
    conn.execute(
        "INSERT INTO bodies (digest, content_type, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (digest, content_type, body),
    )
    return digest


def run_body_digest(
    conn: Connection,
    *,
    content_type: str,
    template: bytes,
    schedule_id: str,
    scheduled_for: int,
    previous: int | None,
) -> str:
    """Store the body of one run of a templated schedule: ``template`` rendered with the
    run's values (``previous``: the timing's occurrence before ``scheduled_for``)."""
    values = run_values(schedule_id=schedule_id, scheduled_for=scheduled_for, previous=previous)
    return store_body(conn, content_type=content_type, body=render(template, values))


def schedule_body_digest(
    conn: Connection, schedule: Schedule, *, scheduled_for: int, previous: int | None
) -> str:
    """Store the body of the run of ``schedule`` at ``scheduled_for``: the schedule's bytes,
    or its template rendered (``previous``: the timing's occurrence before it,
    :func:`appliance.core.timing.previous_occurrence`)."""
    spec = schedule.spec
    if not spec.templated:
        return store_body(conn, content_type=spec.content_type, body=spec.body)
    return run_body_digest(
        conn,
        content_type=spec.content_type,
        template=spec.body,
        schedule_id=schedule.id,
        scheduled_for=scheduled_for,
        previous=previous,
    )
