"""Runs and attempts: the rows behind every delivery (ADR 0033, ADR 0034).

Rules this module guards:

- **One run per occurrence.** A run is inserted with ``ON CONFLICT (schedule_id,
  scheduled_for) DO NOTHING``; its id and idempotency key derive from the schedule id and
  the canonical ``scheduled_for`` text (ADR 0037), so a conflict is always "already there".
- **Every state change follows the one table** in :mod:`appliance.core.runs`: target
  states come from :func:`check_transition`, SQL guards name their source states from
  :func:`sources` (as literals, so SQLite can use the partial indexes).
- **Claim** is one ``UPDATE … WHERE id IN (SELECT … ORDER BY due_at LIMIT :free)
  RETURNING``; each claimed row gets its own random lease token (``randomblob`` is
  evaluated per row) and one ``attempts`` row, in the caller's transaction.
- **Fencing.** Every write that moves a run out of ``running`` says ``AND lease_token = ?
  AND state = 'running'``. Zero rows changed means the lease was taken away: the attempt
  is recorded ``stale`` and nothing else changes.
- **Bodies** are fixed at materialisation and content-addressed: digest = sha256 hex of
  ``content_type + "\\0" + body``.

Functions take ``conn`` and ``now`` (epoch ms) and never commit: the caller's
``Database.write`` is the transaction.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import apsw

from appliance.core.events import EventType, JsonScalar
from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import format_instant, format_scheduled_for
from appliance.core.retry import RetryPolicy
from appliance.core.runs import (
    TERMINAL,
    AttemptOutcome,
    RunState,
    Transition,
    check_transition,
    sources,
)
from appliance.core.schedules import Schedule
from appliance.errors import Conflict, NotFound, StoreError


def state_list(states: Iterable[RunState]) -> str:
    """``('a','b')`` for a SQL ``IN``: literal text, so partial indexes match the query."""
    return "(" + ",".join(f"'{state.value}'" for state in sorted(states)) + ")"


CLAIMABLE_SQL = state_list(sources(Transition.CLAIM))  # ('pending','retry_wait')
OPEN_SQL = state_list(sources(Transition.CANCEL))  # open rows a pause or delete withdraws
_RUNNING = RunState.RUNNING.value


class Trigger(enum.StrEnum):
    SCHEDULE = "schedule"  # materialised by the planner
    MANUAL = "manual"  # a tenant asked for it now


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    id: str
    tenant_id: str
    schedule_id: str
    schedule_version: int
    scheduled_for: int
    idempotency_key: str
    due_at: int
    state: RunState
    trigger: Trigger
    attempt: int
    last_status: int | None
    last_error: str | None
    failure_reason: str | None
    created_at: int
    updated_at: int
    finished_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    run_id: str
    attempt: int
    started_at: int
    finished_at: int | None
    outcome: AttemptOutcome | None
    http_status: int | None
    error: str | None
    latency_ms: int | None
    response_excerpt: str | None


_RUN_COLUMNS = (
    "id, tenant_id, schedule_id, schedule_version, scheduled_for, idempotency_key, due_at,"
    " state, trigger, attempt, last_status, last_error, failure_reason, created_at,"
    " updated_at, finished_at"
)


def _run_record(row: tuple[Any, ...]) -> RunRecord:
    (rid, tid, sid, version, sched, key, due, state, trig, attempt, status, error, reason,
     created, updated, finished) = row  # fmt: skip
    return RunRecord(
        id=rid,
        tenant_id=tid,
        schedule_id=sid,
        schedule_version=version,
        scheduled_for=sched,
        idempotency_key=key,
        due_at=due,
        state=RunState(state),
        trigger=Trigger(trig),
        attempt=attempt,
        last_status=status,
        last_error=None if error is None else str(error),
        failure_reason=None if reason is None else str(reason),
        created_at=created,
        updated_at=updated,
        finished_at=finished,
    )


# --- queries the API uses -------------------------------------------------------------


def get_run(conn: apsw.Connection, *, tenant_id: str, run_id: str) -> RunRecord | None:
    """The run, or None if it does not exist or belongs to another tenant."""
    row = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE id = ? AND tenant_id = ?",
        (run_id, tenant_id),
    ).fetchone()
    return None if row is None else _run_record(row)


def list_attempts(conn: apsw.Connection, *, run_id: str) -> list[AttemptRecord]:
    """Every attempt of a run, first first. Callers check the run's tenant first."""
    rows = conn.execute(
        "SELECT run_id, attempt, started_at, finished_at, outcome, http_status, error,"
        " latency_ms, response_excerpt FROM attempts WHERE run_id = ? ORDER BY attempt",
        (run_id,),
    )
    return [
        AttemptRecord(
            run_id=rid,
            attempt=attempt,
            started_at=started,
            finished_at=finished,
            outcome=None if outcome is None else AttemptOutcome(outcome),
            http_status=status,
            error=error,
            latency_ms=latency,
            response_excerpt=excerpt,
        )
        for rid, attempt, started, finished, outcome, status, error, latency, excerpt in rows
    ]


def list_runs(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    limit: int,
    before_scheduled_for: int | None = None,
) -> list[RunRecord]:
    """A schedule's runs, newest occurrence first; keyset page below
    ``before_scheduled_for`` (served by the unique index)."""
    sql = f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE tenant_id = ? AND schedule_id = ?"
    params: list[object] = [tenant_id, schedule_id]
    if before_scheduled_for is not None:
        sql += " AND scheduled_for < ?"
        params.append(before_scheduled_for)
    sql += " ORDER BY scheduled_for DESC LIMIT ?"
    params.append(limit)
    return [_run_record(row) for row in conn.execute(sql, params)]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryBudget:
    """Where a run's attempt budget and retry window start: at materialisation, or at its
    last replay. Attempt numbers keep counting across replays and restarts (X-Attempt,
    attempts rows); the budget counts only the attempts charged to it since."""

    attempt_base: int  # attempts not charged: those before the last replay, and restarts
    window_start: int  # ms: scheduled_for, or the last replay instant

    def attempts_used(self, attempt: int) -> int:
        return attempt - self.attempt_base


def replay_run(conn: apsw.Connection, *, tenant_id: str, run_id: str, now: int) -> RunRecord:
    """Reopen a finished run as ``pending``, due now: same id, same key, attempt numbers
    keep counting, and a fresh attempt budget and retry window start now (``RetryBudget``).
    NotFound; Conflict if it is not finished."""
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    if run.state not in sources(Transition.REPLAY):
        raise Conflict(
            f"run {run_id} is {run.state}; only finished runs (succeeded, failed, missed,"
            " cancelled) can be replayed"
        )
    target = check_transition(run.state, Transition.REPLAY)
    conn.execute(
        "UPDATE job_runs SET state = ?, due_at = ?, failure_reason = NULL, finished_at = NULL,"
        " attempt_base = attempt, budget_from = ?, updated_at = ? WHERE id = ? AND state = ?",
        (target.value, now, now, now, run_id, run.state.value),
    )
    expect_one(conn, f"replay of {run_id}")
    return _must_get(conn, tenant_id=tenant_id, run_id=run_id)


def trigger_run(conn: apsw.Connection, *, schedule: Schedule, now: int) -> tuple[RunRecord, bool]:
    """A manual occurrence at ``now`` floored to the second, due now; ``(run, created)``.
    A second trigger within the same second returns the same run, ``created=False``."""
    scheduled_for = now - now % 1000
    digest = store_body(conn, content_type=schedule.spec.content_type, body=schedule.spec.body)
    new = occurrence_run(
        schedule,
        scheduled_for=scheduled_for,
        due_at=now,
        state=RunState.PENDING,
        trigger=Trigger.MANUAL,
        body_digest=digest,
    )
    created = insert_run(conn, run=new, now=now)
    return _must_get(conn, tenant_id=schedule.tenant_id, run_id=new.id), created


def withdraw_future_runs(conn: apsw.Connection, *, schedule_id: str, now: int) -> int:
    """An edited schedule: delete the never-attempted rows of occurrences still in the
    future, so the new spec (re-derived cursor) can plan those slots. Occurrences already
    due under the old spec keep their runs and are delivered. Returns rows deleted."""
    conn.execute(
        f"DELETE FROM job_runs WHERE schedule_id = ? AND state IN {OPEN_SQL}"
        " AND attempt = 0 AND scheduled_for > ?",
        (schedule_id, now),
    )
    return conn.changes()


def withdraw_open_runs(conn: apsw.Connection, *, schedule_id: str, now: int) -> int:
    """A paused or deleted schedule: future rows are withdrawn (:func:`withdraw_future_runs`)
    and every other open row (pending or retry_wait) becomes ``cancelled``. Running rows
    finish their attempt. Returns rows touched."""
    deleted = withdraw_future_runs(conn, schedule_id=schedule_id, now=now)
    cancelled = {check_transition(s, Transition.CANCEL) for s in sources(Transition.CANCEL)}
    (target,) = cancelled
    conn.execute(
        f"UPDATE job_runs SET state = ?, finished_at = ?, updated_at = ?"
        f" WHERE schedule_id = ? AND state IN {OPEN_SQL}",
        (target.value, now, now, schedule_id),
    )
    return deleted + conn.changes()


# --- materialisation ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRun:
    """A run row about to be inserted."""

    id: str
    tenant_id: str
    schedule_id: str
    schedule_version: int
    scheduled_for: int
    idempotency_key: str
    due_at: int
    state: RunState  # pending, or missed for an occurrence the catch-up policy drops
    trigger: Trigger
    body_digest: str


def occurrence_run(
    schedule: Schedule,
    *,
    scheduled_for: int,
    due_at: int,
    state: RunState,
    trigger: Trigger,
    body_digest: str,
) -> NewRun:
    """The row for one occurrence; id and key derive from the canonical instant."""
    text = format_scheduled_for(scheduled_for)
    return NewRun(
        id=run_id(schedule.id, text),
        tenant_id=schedule.tenant_id,
        schedule_id=schedule.id,
        schedule_version=schedule.version,
        scheduled_for=scheduled_for,
        idempotency_key=idempotency_key(schedule.id, text),
        due_at=due_at,
        state=state,
        trigger=trigger,
        body_digest=body_digest,
    )


def store_body(conn: apsw.Connection, *, content_type: str, body: bytes) -> str:
    """Store body bytes once; returns their digest."""
    digest = hashlib.sha256(content_type.encode("utf-8") + b"\0" + body).hexdigest()
    conn.execute(
        "INSERT OR IGNORE INTO bodies (digest, content_type, body) VALUES (?, ?, ?)",
        (digest, content_type, body),
    )
    return digest


def insert_run(conn: apsw.Connection, *, run: NewRun, now: int) -> bool:
    """Insert unless the occurrence already has a run; True if this call created it."""
    finished = now if run.state in TERMINAL else None
    conn.execute(
        "INSERT INTO job_runs (id, tenant_id, schedule_id, schedule_version, scheduled_for,"
        " idempotency_key, due_at, state, trigger, body_digest, created_at, updated_at,"
        " finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (schedule_id, scheduled_for) DO NOTHING",
        (
            run.id,
            run.tenant_id,
            run.schedule_id,
            run.schedule_version,
            run.scheduled_for,
            run.idempotency_key,
            run.due_at,
            run.state.value,
            run.trigger.value,
            run.body_digest,
            now,
            now,
            finished,
        ),
    )
    return conn.changes() == 1


def earliest_due_at(conn: apsw.Connection) -> int | None:
    """The earliest ``due_at`` of any claimable run (served by ``job_runs_claimable``)."""
    row = conn.execute(f"SELECT MIN(due_at) FROM job_runs WHERE state IN {CLAIMABLE_SQL}")
    value = row.fetchone()
    return None if value is None or value[0] is None else int(value[0])


def retry_policy(max_attempts: int) -> RetryPolicy:
    """A schedule's retry budget: its ``max_attempts`` with the default delays and window."""
    return RetryPolicy(max_attempts=max_attempts)


def run_event_data(
    *,
    scheduled_for: int,
    attempt: int,
    key: str,
    status: int | None = None,
    error: str | None = None,
    reason: str | None = None,
    next_attempt_at: int | None = None,
) -> dict[str, JsonScalar]:
    """The data of ``schedule.run.succeeded|retrying|failed`` events."""
    return {
        "scheduled_for": format_scheduled_for(scheduled_for),
        "attempt": attempt,
        "idempotency_key": key,
        "status": status,
        "error": error,
        "reason": reason,
        "next_attempt_at": None if next_attempt_at is None else format_instant(next_attempt_at),
    }


EVENT_FOR: dict[RunState, EventType] = {
    RunState.SUCCEEDED: EventType.RUN_SUCCEEDED,
    RunState.RETRY_WAIT: EventType.RUN_RETRYING,
    RunState.FAILED: EventType.RUN_FAILED,
}


def headers_from_json(text: str) -> tuple[tuple[str, str], ...]:
    """A schedule's stored ``headers`` column (JSON list of pairs) as a tuple of pairs."""
    return tuple((str(name), str(value)) for name, value in json.loads(text))


def _must_get(conn: apsw.Connection, *, tenant_id: str, run_id: str) -> RunRecord:
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise StoreError(f"run {run_id} vanished inside its own transaction")
    return run


def expect_one(conn: apsw.Connection, what: str) -> None:
    # Inside one BEGIN IMMEDIATE transaction a row read a moment ago cannot change under
    # us; if it did, something bypassed the writer connection and the write must not stand.
    if conn.changes() != 1:
        raise StoreError(f"{what}: the row changed under the writer")
