"""Runs and attempts as the tenant sees them: reads, withdrawals, and run events
(ADR 0033, ADR 0034).

Rules this module guards:

- **Every state change follows the one table** in :mod:`appliance.core.runs`: target
  states come from :func:`check_transition`, SQL guards name their source states from
  :func:`sources` (as literals, so SQLite can use the partial indexes).
- **Withdrawal.** A paused, deleted or re-planned schedule withdraws its open runs: rows
  of future occurrences never attempted are deleted, other open rows become
  ``cancelled``, running rows finish their attempt — and get no retry behind the tenant's
  back (:func:`cancel_if_withdrawn`).
- Rows are read into records by column name (:mod:`appliance.store.infra.rows`).

Inserting runs is :mod:`appliance.store.materialise`; claims, heartbeats and completion
are :mod:`appliance.store.claims`; reclaim is :mod:`appliance.store.usecases.reclaim`; trigger and
replay are :mod:`appliance.store.usecases.manual`. Functions take ``conn`` and ``now`` (epoch ms)
and never commit: the caller's ``Database.write`` is the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from appliance.core.events import EventType, JsonScalar
from appliance.core.instants import format_instant, format_scheduled_for
from appliance.core.runs import (
    AttemptOutcome,
    RunState,
    Transition,
    Trigger,
    check_transition,
    sources,
)
from appliance.errors import NotFound, StoreError
from appliance.store.events import NewEvent, append_events
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection, Sql


def state_list(states: Iterable[RunState]) -> str:
    """``('a','b')`` for a SQL ``IN``: literal text, so partial indexes match the query."""
    return "(" + ",".join(f"'{state.value}'" for state in sorted(states)) + ")"


CLAIMABLE_SQL: Final = state_list(sources(Transition.CLAIM))  # ('pending','retry_wait')
OPEN_SQL: Final = state_list(sources(Transition.CANCEL))  # open rows a pause or delete withdraws
RUNNING_SQL: Final = f"'{RunState.RUNNING.value}'"
# How claims and reclaims read an attempted run's id and retry budget from ``job_runs r``
# (``rows.Columns`` sql; the record builds a ``core.retry.RetryBudget`` from the two).
ATTEMPTED_RUN_SQL: Final = {
    "run_id": "r.id",
    "budget_base": "r.attempt_base",
    "budget_from": "COALESCE(r.budget_from, r.scheduled_for)",
}


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
    resend_of: str | None = None  # the run this one is a copy of (a resend with a new key)


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
    signed_at: int | None = None  # unix seconds its request was signed at (X-Signature-Timestamp)
    reclaimed_at: int | None = None  # when a reclaim took it back (abandoned, or stale after)


RUN_COLUMNS: Final = rows.Columns(
    RunRecord,
    [
        "id",
        "tenant_id",
        "schedule_id",
        "schedule_version",
        "scheduled_for",
        "idempotency_key",
        "due_at",
        "state",
        "trigger",
        "attempt",
        "last_status",
        "last_error",
        "failure_reason",
        "created_at",
        "updated_at",
        "finished_at",
        "resend_of",
    ],
    convert={"state": rows.enum_of(RunState), "trigger": rows.enum_of(Trigger)},
)
_ATTEMPT_COLUMNS: Final = rows.Columns(
    AttemptRecord,
    [
        "run_id",
        "attempt",
        "started_at",
        "finished_at",
        "outcome",
        "http_status",
        "error",
        "latency_ms",
        "response_excerpt",
        "signed_at",
        "reclaimed_at",
    ],
    convert={"outcome": rows.optional_enum_of(AttemptOutcome)},
)


def get_run(conn: Connection, *, tenant_id: str, run_id: str) -> RunRecord | None:
    """The run, or None if it does not exist or belongs to another tenant."""
    row = conn.execute(
        f"SELECT {RUN_COLUMNS.select} FROM job_runs WHERE id = ? AND tenant_id = ?",
        (run_id, tenant_id),
    ).fetchone()
    return None if row is None else RUN_COLUMNS.one(row)


def must_get_run(conn: Connection, *, tenant_id: str, run_id: str) -> RunRecord:
    """The run just written in this transaction."""
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise StoreError(f"run {run_id} vanished inside its own transaction")
    return run


def list_attempts(conn: Connection, *, run_id: str) -> list[AttemptRecord]:
    """Every attempt of a run, first first. Callers check the run's tenant first."""
    return _ATTEMPT_COLUMNS.all(
        conn.execute(
            f"SELECT {_ATTEMPT_COLUMNS.select} FROM attempts WHERE run_id = ? ORDER BY attempt",
            (run_id,),
        )
    )


def run_with_attempts(
    conn: Connection, *, tenant_id: str, run_id: str
) -> tuple[RunRecord, list[AttemptRecord]]:
    """The tenant's run and every attempt of it, first first, read together (one
    snapshot: the attempts are the run's as it is); NotFound for a missing run or
    another tenant's, alike."""
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    return run, list_attempts(conn, run_id=run_id)


def list_runs(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    limit: int,
    before_scheduled_for: int | None = None,
) -> list[RunRecord]:
    """A schedule's runs, newest occurrence first; keyset page below
    ``before_scheduled_for`` (served by the unique index)."""
    sql = f"SELECT {RUN_COLUMNS.select} FROM job_runs WHERE tenant_id = ? AND schedule_id = ?"
    params: list[object] = [tenant_id, schedule_id]
    if before_scheduled_for is not None:
        sql += " AND scheduled_for < ?"
        params.append(before_scheduled_for)
    sql += " ORDER BY scheduled_for DESC LIMIT ?"
    params.append(limit)
    return RUN_COLUMNS.all(conn.execute(sql, params))


# --- withdrawal ---------------------------------------------------------------------------


def withdraw_future_runs(conn: Connection, *, schedule_id: str, now: int) -> int:
    """An edited schedule: delete the never-attempted rows of occurrences still in the
    future, so the new spec (re-derived cursor) can plan those slots. Occurrences already
    due under the old spec keep their runs and are delivered. Returns rows deleted."""
    conn.execute(
        f"DELETE FROM job_runs WHERE schedule_id = ? AND state IN {OPEN_SQL}"
        " AND attempt = 0 AND scheduled_for > ?",
        (schedule_id, now),
    )
    return conn.changes()


def withdraw_open_runs(conn: Connection, *, schedule_id: str, now: int) -> int:
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


# When a schedule was last paused or deleted: the later of the two (scalar max: greatest).
_WITHDRAWN_AT: Final = Sql(
    sqlite="MAX(s.updated_at, COALESCE(s.deleted_at, 0))",
    postgres="greatest(s.updated_at, COALESCE(s.deleted_at, 0))",
)


def cancel_if_withdrawn(conn: Connection, *, run_id: str, attempt: int, now: int) -> bool:
    """A run just sent to ``retry_wait`` whose schedule was paused or deleted while this
    attempt was in flight gets no retry behind the tenant's back: it is cancelled, as the
    pause cancelled the schedule's other open runs. (A run replayed on an already paused
    schedule keeps its retries: the tenant asked for it.) So does a run of a suspended
    tenant (:mod:`appliance.store.suspension`). True if it was cancelled."""
    target = check_transition(RunState.RETRY_WAIT, Transition.CANCEL)
    conn.execute(
        "UPDATE job_runs SET state = ?, finished_at = ?, updated_at = ?"
        f" WHERE id = ? AND state = '{RunState.RETRY_WAIT.value}' AND (EXISTS"
        " (SELECT 1 FROM schedules s WHERE s.id = job_runs.schedule_id"
        " AND (s.paused = 1 OR s.deleted_at IS NOT NULL)"
        f" AND {_WITHDRAWN_AT.on(conn)}"
        " >= (SELECT started_at FROM attempts WHERE run_id = ? AND attempt = ?))"
        " OR EXISTS (SELECT 1 FROM tenants t WHERE t.id = job_runs.tenant_id"
        " AND t.suspended_at IS NOT NULL))",
        (target.value, now, now, run_id, run_id, attempt),
    )
    return conn.changes() == 1


# --- run events ---------------------------------------------------------------------------


EVENT_FOR: Final[dict[RunState, EventType]] = {
    RunState.SUCCEEDED: EventType.RUN_SUCCEEDED,
    RunState.RETRY_WAIT: EventType.RUN_RETRYING,
    RunState.FAILED: EventType.RUN_FAILED,
}


class AttemptedRun(Protocol):
    """What a run event says about the run an attempt belonged to (a claimed run, or a
    running one being reclaimed)."""

    @property
    def run_id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def schedule_id(self) -> str: ...
    @property
    def scheduled_for(self) -> int: ...
    @property
    def idempotency_key(self) -> str: ...
    @property
    def attempt(self) -> int: ...


def announce_attempt(
    conn: Connection,
    *,
    run: AttemptedRun,
    state: RunState,
    now: int,
    status: int | None = None,
    error: str | None = None,
    reason: str | None = None,
    next_attempt_at: int | None = None,
) -> None:
    """The ``schedule.run.succeeded|retrying|failed`` event of the attempt that left
    ``run`` in ``state`` (contracts/events/schedule.run.*.json)."""
    append_events(
        conn,
        [
            attempt_event(
                run=run, state=state, now=now, status=status, error=error, reason=reason,
                next_attempt_at=next_attempt_at,
            )
        ],
    )  # fmt: skip


def attempt_event(
    *,
    run: AttemptedRun,
    state: RunState,
    now: int,
    status: int | None = None,
    error: str | None = None,
    reason: str | None = None,
    next_attempt_at: int | None = None,
) -> NewEvent:
    """:func:`announce_attempt`'s event, to append with others (a batch of completions)."""
    return NewEvent(
        tenant_id=run.tenant_id,
        type=EVENT_FOR[state],
        now=now,
        schedule_id=run.schedule_id,
        run_id=run.run_id,
        data=run_event_data(
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            key=run.idempotency_key,
            status=status,
            error=error,
            reason=reason,
            next_attempt_at=next_attempt_at,
        ),
    )


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


def expect_one(conn: Connection, what: str) -> None:
    # Inside one BEGIN IMMEDIATE transaction a row read a moment ago cannot change under
    # us; if it did, something bypassed the writer connection and the write must not stand.
    if conn.changes() != 1:
        raise StoreError(f"{what}: the row changed under the writer")
