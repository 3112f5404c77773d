"""Reclaim: taking runs back from an executor that died or lost its lease (ADR 0033).

Two callers, one path (:func:`abandon_runs`):

- **Boot** (:func:`reclaim_previous`): every run earlier incarnations left ``running``
  is taken back at once, without waiting for lease expiry (the lock file proves they are
  dead), and those incarnations are marked ended.
- **The reaper** (:func:`reclaim_expired`): running rows whose lease expired, or that were
  claimed longer ago than the hard ceiling whatever their heartbeats say.

Rules this module guards:

- The run goes ``running`` → ``retry_wait`` due now, or ``failed``; its open attempt
  becomes ``abandoned`` and keeps its attempt number; ``reclaimed_at`` records the instant
  for good (a late, ``stale`` answer of the attempt changes its outcome, never that).
  Which of the two, and whether the attempt is charged to the run's budget, is decided by
  :func:`appliance.core.retry.decide_reclaim` from the facts read here — a boot reclaim is
  not charged (the process died, the receiver did nothing wrong), a lapsed lease is.
- The reaper spares the leases its own process still holds by the monotonic clock: after
  a forward wall-clock step those look lapsed, yet their deliveries are live, and taking
  them back would send the run again beside them. The heartbeat decides them instead
  (renewed, or given up ``abandoned`` and due at once).
- Fencing on the lease token, as for completions; a run whose schedule was paused or
  deleted during the attempt is cancelled instead of retried.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final

from appliance.core.retry import RetryBudget, RetryPolicy, decide_reclaim
from appliance.core.retry_input import stored_policy
from appliance.core.runs import TERMINAL, AttemptOutcome, RunState, check_transition
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection, Sql
from appliance.store.runs import (
    ATTEMPTED_RUN_SQL,
    RUNNING_SQL,
    announce_attempt,
    cancel_if_withdrawn,
    expect_one,
)

ABANDONED: Final = AttemptOutcome.ABANDONED.value  # a reclaim's retrying event says why
RESTARTED: Final = "the appliance restarted during this attempt"
LAPSED: Final = "the lease expired before the attempt finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningRun:
    """What a reclaim needs to know about a ``running`` row."""

    run_id: str
    tenant_id: str
    schedule_id: str
    scheduled_for: int
    idempotency_key: str
    attempt: int
    budget: RetryBudget
    lease_token: str
    retry: RetryPolicy  # the schedule's, read with the run (core.retry_input)
    abandoned_in_a_row: int  # attempts of the current budget, this one included, that
    # ended abandoned (or stale: a zombie's late answer) since its last answered attempt


def _running(
    *,
    budget_base: int,
    budget_from: int,
    abandoned: int,
    max_attempts: int,
    retry_policy: str | None,
    **fields: Any,
) -> RunningRun:
    budget = RetryBudget(attempt_base=budget_base, window_start=budget_from)
    return RunningRun(
        budget=budget,
        abandoned_in_a_row=max(abandoned, 1),
        retry=stored_policy(max_attempts, retry_policy),
        **fields,
    )


_COLUMNS: Final = rows.Columns(
    _running,
    [
        "run_id",
        "tenant_id",
        "schedule_id",
        "scheduled_for",
        "idempotency_key",
        "attempt",
        "lease_token",
        "max_attempts",
        "retry_policy",
        "budget_base",
        "budget_from",
        "abandoned",
    ],
    table="r",
    sql={
        **ATTEMPTED_RUN_SQL,
        "max_attempts": "s.max_attempts",
        "retry_policy": "s.retry_policy",
        "abandoned": (
            "(SELECT COUNT(*) FROM attempts a WHERE a.run_id = r.id"
            " AND a.started_at >= COALESCE(r.budget_from, r.scheduled_for)"
            " AND (a.outcome IS NULL OR a.outcome IN ('abandoned', 'stale'))"
            " AND a.attempt > COALESCE((SELECT MAX(b.attempt) FROM attempts b"
            " WHERE b.run_id = r.id AND b.outcome IN ('ok', 'retryable', 'permanent')), 0))"
        ),
    },
)
_RUNNING_ROWS: Final = (
    f"SELECT {_COLUMNS.select} FROM job_runs r JOIN schedules s ON s.id = r.schedule_id"
    f" WHERE r.state = {RUNNING_SQL}"
)


def reclaim_previous(conn: Connection, *, incarnation_id: str, now: int) -> int:
    """Boot: take back every run earlier incarnations left ``running`` (not charged to
    their budgets) and mark those incarnations ended. Returns how many runs."""
    running = _COLUMNS.all(
        conn.execute(
            f"{_RUNNING_ROWS} AND (r.lease_owner IS NULL OR r.lease_owner != ?)",
            (incarnation_id,),
        )
    )
    abandon_runs(conn, running, error=RESTARTED, now=now, restart=True)
    conn.execute(
        "UPDATE incarnations SET ended_at = ? WHERE id != ? AND ended_at IS NULL",
        (now, incarnation_id),
    )
    return len(running)


def reclaim_expired(
    conn: Connection,
    *,
    now: int,
    ceiling_ms: int,
    limit: int,
    spare: Collection[str] = (),
) -> int:
    """The reaper: reclaim running rows whose lease expired before ``now``, or that were
    claimed more than ``ceiling_ms`` ago (no attempt may run that long, whatever its
    heartbeats say). At most ``limit`` rows; returns how many. ``spare``: lease tokens
    the calling process still holds by its own monotonic clock — left to its heartbeat,
    whatever the wall clock says."""
    running = _COLUMNS.all(
        conn.execute(
            f"{_RUNNING_ROWS} AND (r.lease_expires_at < ? OR r.updated_at < ?)"
            f" AND {_NOT_SPARED.on(conn)} ORDER BY r.lease_expires_at LIMIT ?",
            (now, now - ceiling_ms, _tokens(spare), limit),
        )
    )
    abandon_runs(conn, running, error=LAPSED, now=now, restart=False)
    return len(running)


def earliest_lease_expiry(conn: Connection, *, spare: Collection[str] = ()) -> int | None:
    """When the next lease lapses if nobody renews it, leases in ``spare`` aside (served
    by ``job_runs_leases``, in order, stopping at the first one not spared)."""
    row = conn.execute(
        f"SELECT r.lease_expires_at FROM job_runs r WHERE r.state = {RUNNING_SQL}"
        f" AND {_NOT_SPARED.on(conn)} ORDER BY r.lease_expires_at LIMIT 1",
        (_tokens(spare),),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


# The spared tokens arrive as one JSON array: one statement whatever their number.
_NOT_SPARED: Final = Sql(
    sqlite="r.lease_token NOT IN (SELECT value FROM json_each(?))",
    postgres="r.lease_token NOT IN (SELECT value FROM json_array_elements_text(CAST(? AS json)))",
)


def _tokens(spare: Collection[str]) -> str:
    return json.dumps(sorted(spare))


def abandon_runs(
    conn: Connection, running: Sequence[RunningRun], *, error: str, now: int, restart: bool
) -> list[RunState]:
    """Take back each run; ``restart``: the whole appliance died. Returns each run's new
    state (``retry_wait``, ``failed``, or ``cancelled`` when its schedule was paused or
    deleted during the attempt)."""
    return [_abandon(conn, run, error=error, now=now, restart=restart) for run in running]


def _abandon(conn: Connection, run: RunningRun, *, error: str, now: int, restart: bool) -> RunState:
    decision = decide_reclaim(
        run.retry,
        budget=run.budget,
        attempt=run.attempt,
        restart=restart,
        abandoned_in_a_row=run.abandoned_in_a_row,
        now_ms=now,
    )
    target = check_transition(RunState.RUNNING, decision.transition)
    reason = None if decision.failure_reason is None else decision.failure_reason.value
    conn.execute(
        "UPDATE job_runs SET state = ?, due_at = COALESCE(?, due_at), lease_token = NULL,"
        " lease_expires_at = NULL, heartbeat_at = NULL, last_status = NULL, last_error = ?,"
        " failure_reason = ?, finished_at = ?, updated_at = ?, attempt_base = attempt_base + ?"
        f" WHERE id = ? AND lease_token = ? AND state = {RUNNING_SQL}",
        (
            target.value,
            decision.due_at,
            error,
            reason,
            now if target in TERMINAL else None,
            now,
            int(not decision.charged),  # an uncharged attempt moves the budget's base past it
            run.run_id,
            run.lease_token,
        ),
    )
    expect_one(conn, f"reclaim of {run.run_id}")
    conn.execute(
        "UPDATE attempts SET outcome = ?, finished_at = ?, reclaimed_at = ?, error = ?"
        " WHERE run_id = ? AND attempt = ? AND outcome IS NULL",
        (ABANDONED, now, now, error, run.run_id, run.attempt),
    )
    if target is RunState.RETRY_WAIT and cancel_if_withdrawn(
        conn, run_id=run.run_id, attempt=run.attempt, now=now
    ):
        return RunState.CANCELLED  # paused or deleted meanwhile: no retry, as in complete_run
    announce_attempt(
        conn,
        run=run,
        state=target,
        now=now,
        error=error,
        reason=reason or ABANDONED,
        next_attempt_at=decision.due_at,
    )
    return target
