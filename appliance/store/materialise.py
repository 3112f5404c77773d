"""Inserting runs: the one batched insert behind the planner, a manual trigger and any
future producer of runs (ADR 0033 "Planning", ADR 0034, ADR 0037).

Rules this module guards:

- **One run per occurrence.** Every row is inserted ``ON CONFLICT (schedule_id,
  scheduled_for) DO NOTHING``; its id and key derive from the schedule id and the
  canonical ``scheduled_for`` text (:func:`appliance.core.runs.occurrence_run`), so a
  conflict is always "already there", whoever got there first.
- One prepared statement inserts a whole batch; only the rows actually inserted come
  back, so callers count and announce only what they created.
- **Bodies** are fixed at materialisation and content-addressed: digest = sha256 hex of
  ``content_type + "\\0" + body``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import apsw

from appliance.core.runs import TERMINAL, NewRun

# NewRun's field names are the job_runs columns they fill, in order.
_INSERT: Final = (
    f"INSERT INTO job_runs ({', '.join(NewRun._fields)}, created_at, updated_at, finished_at)"
    f" VALUES ({', '.join('?' * (len(NewRun._fields) + 3))})"
    " ON CONFLICT (schedule_id, scheduled_for) DO NOTHING RETURNING id"
)


def insert_runs(conn: apsw.Connection, runs: Sequence[NewRun], *, now: int) -> set[str]:
    """Insert every run whose occurrence has none yet; the ids of those this call created.
    A row that meets the unique index (already planned, already triggered, or a racing
    planner got there first) is skipped."""
    if not runs:
        return set()
    params = [(*run, now, now, now if run.state in TERMINAL else None) for run in runs]
    # The statement runs row by row as its RETURNING rows are read: read them all.
    return {run_id for (run_id,) in conn.executemany(_INSERT, params)}


def store_body(conn: apsw.Connection, *, content_type: str, body: bytes) -> str:
    """Store body bytes once; returns their digest."""
    digest = hashlib.sha256(content_type.encode("utf-8") + b"\0" + body).hexdigest()
    conn.execute(
        "INSERT OR IGNORE INTO bodies (digest, content_type, body) VALUES (?, ?, ?)",
        (digest, content_type, body),
    )
    return digest
