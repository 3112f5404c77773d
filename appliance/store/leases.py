"""Leases: claims, heartbeats, fenced completion and reclaim (ADR 0033).

An incarnation is one process start. It claims runs under leases, renews them with
heartbeats, completes them fenced, and — at boot — takes back whatever earlier
incarnations left ``running``.

Rules this module guards:

- **Claim** is one ``UPDATE … WHERE id IN (SELECT … claimable AND due_at <= :now ORDER
  BY due_at LIMIT :free) RETURNING``: two claimers can never both hold a run, because
  the second statement no longer sees it as claimable. Each row gets its own random
  lease token (SQLite's ``randomblob`` is evaluated per row) and one ``attempts`` row.
- **Heartbeat**: one ``UPDATE`` renews every unexpired running row of an incarnation.
  An expired lease is the reaper's, never silently revived.
- **Fencing**: every write that moves a run out of ``running`` says ``AND lease_token =
  ? AND state = 'running'``. Zero rows changed → the attempt is recorded ``stale`` and
  nothing else changes (no event, no state).
- **Reclaim** (boot, and the reaper for expired leases or rows past the hard ceiling):
  ``running`` → ``retry_wait`` due now, or ``failed`` (exhausted); the open attempt becomes
  ``abandoned`` and keeps its attempt number. The reaper charges it to the run's budget
  (:func:`appliance.core.retry.decide_after_abandon`); the boot reclaim does not — the
  process died, the receiver did nothing wrong — and fails a run only past its retry
  window or after ``RESTART_LIMIT`` abandoned attempts in a row
  (:func:`appliance.core.retry.decide_after_restart`).
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from appliance.core.events import EventType
from appliance.core.retry import decide_after_abandon, decide_after_restart
from appliance.core.runs import TERMINAL, AttemptOutcome, RunState, Transition, check_transition
from appliance.store.events import append_event
from appliance.store.runs import (
    CLAIMABLE_SQL,
    EVENT_FOR,
    RetryBudget,
    earliest_due_at,
    expect_one,
    headers_from_json,
    retry_policy,
    run_event_data,
    withdraw_open_runs,
)
from appliance.store.tenants import active_secrets

_RUNNING = RunState.RUNNING.value
ABANDONED = AttemptOutcome.ABANDONED.value  # a reclaim's retrying event says why


# --- claim, heartbeat, completion ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedRun:
    """Everything one attempt needs, read in the claim's transaction."""

    run_id: str
    tenant_id: str
    schedule_id: str
    scheduled_for: int
    idempotency_key: str
    attempt: int  # 1-based number of this attempt
    budget: RetryBudget
    lease_token: str
    lease_expires_at: int
    target_url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    content_type: str
    timeout_seconds: int
    max_attempts: int
    secrets: tuple[str, ...]  # the tenant's active signing secrets, newest first


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimBatch:
    runs: tuple[ClaimedRun, ...]
    next_due_at: int | None  # earliest due_at still claimable after this claim


_CLAIM = (
    f"UPDATE job_runs SET state = '{check_transition(RunState.PENDING, Transition.CLAIM).value}',"
    " attempt = attempt + 1, lease_owner = :owner, lease_token = lower(hex(randomblob(16))),"
    " lease_expires_at = :expires, heartbeat_at = :now, updated_at = :now"
    " WHERE id IN (SELECT id FROM job_runs"
    f" WHERE state IN {CLAIMABLE_SQL} AND due_at <= :now ORDER BY due_at LIMIT :limit)"
    " RETURNING id, attempt, lease_token"
)

_DETAILS = (
    "SELECT r.tenant_id, r.schedule_id, r.scheduled_for, r.idempotency_key, s.target_url,"
    " s.headers, s.timeout_seconds, s.max_attempts, b.content_type, b.body, r.attempt_base,"
    " COALESCE(r.budget_from, r.scheduled_for)"
    " FROM job_runs r JOIN schedules s ON s.id = r.schedule_id"
    " JOIN bodies b ON b.digest = r.body_digest WHERE r.id = ?"
)


def claim_runs(
    conn: apsw.Connection, *, owner: str, now: int, lease_ms: int, limit: int
) -> ClaimBatch:
    """Claim up to ``limit`` due runs for incarnation ``owner``, earliest ``due_at`` first."""
    claimed: list[ClaimedRun] = []
    if limit > 0:
        params = {"owner": owner, "now": now, "expires": now + lease_ms, "limit": limit}
        secrets: dict[str, tuple[str, ...]] = {}
        for rid, attempt, token in list(conn.execute(_CLAIM, params)):
            claimed.append(_claimed(conn, rid, attempt, token, now + lease_ms, secrets, now))
            conn.execute(
                "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id, started_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (rid, attempt, token, owner, now),
            )
    claimed.sort(key=lambda run: run.scheduled_for)
    return ClaimBatch(runs=tuple(claimed), next_due_at=earliest_due_at(conn))


def _claimed(
    conn: apsw.Connection,
    rid: str,
    attempt: int,
    token: str,
    expires: int,
    secrets: dict[str, tuple[str, ...]],
    now: int,
) -> ClaimedRun:
    (row,) = conn.execute(_DETAILS, (rid,))
    tenant, schedule, sched_for, key, url, headers, timeout, max_attempts, ctype, body = row[:10]
    attempt_base, budget_from = row[10:]
    if tenant not in secrets:
        secrets[tenant] = tuple(active_secrets(conn, tenant_id=tenant, now=now))
    return ClaimedRun(
        run_id=rid,
        tenant_id=tenant,
        schedule_id=schedule,
        scheduled_for=sched_for,
        idempotency_key=key,
        attempt=attempt,
        budget=RetryBudget(attempt_base=attempt_base, window_start=budget_from),
        lease_token=token,
        lease_expires_at=expires,
        target_url=url,
        headers=headers_from_json(headers),
        body=bytes(body),
        content_type=ctype,
        timeout_seconds=timeout,
        max_attempts=max_attempts,
        secrets=secrets[tenant],
    )


def renew_leases(conn: apsw.Connection, *, owner: str, now: int, lease_ms: int) -> frozenset[str]:
    """The heartbeat: extend every unexpired lease ``owner`` holds to ``now + lease_ms``.
    Returns the lease tokens renewed: a delivery whose token is missing has lost its lease
    (expired, reclaimed, or completed) and must stop."""
    rows = conn.execute(
        "UPDATE job_runs SET lease_expires_at = ?, heartbeat_at = ?"
        f" WHERE lease_owner = ? AND state = '{_RUNNING}' AND lease_expires_at >= ?"
        " RETURNING lease_token",
        (now + lease_ms, now, owner, now),
    )
    return frozenset(token for (token,) in rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The result of one attempt and what it does to the run."""

    outcome: AttemptOutcome  # of the attempt: ok, retryable or permanent
    transition: Transition  # SUCCEED, RETRY or FAIL
    due_at: int | None  # the next attempt's due_at for RETRY
    failure_reason: str | None  # for FAIL
    http_status: int | None
    error: str | None
    latency_ms: int
    response_excerpt: str | None
    failure_class: str | None = None  # why no response came (connect, dns, timeout, ...)
    pause_schedule: bool = False  # 410 Gone: the receiver asked us to stop


def complete_run(
    conn: apsw.Connection, *, run: ClaimedRun, completion: Completion, now: int
) -> bool:
    """Apply an attempt's result, fenced on the lease token. False: the lease was lost,
    the attempt is recorded ``stale`` and nothing else changed."""
    target = check_transition(RunState.RUNNING, completion.transition)
    conn.execute(
        "UPDATE job_runs SET state = ?, due_at = COALESCE(?, due_at), lease_token = NULL,"
        " lease_expires_at = NULL, heartbeat_at = NULL, last_status = ?, last_error = ?,"
        " failure_reason = ?, finished_at = ?, updated_at = ?"
        f" WHERE id = ? AND lease_token = ? AND state = '{_RUNNING}'",
        (
            target.value,
            completion.due_at,
            completion.http_status,
            completion.error,
            completion.failure_reason,
            now if target in TERMINAL else None,
            now,
            run.run_id,
            run.lease_token,
        ),
    )
    applied = conn.changes() == 1
    outcome = completion.outcome if applied else AttemptOutcome.STALE
    _finish_attempt(conn, run=run, completion=completion, outcome=outcome, now=now)
    if applied and target is RunState.RETRY_WAIT and _cancel_if_withdrawn(conn, run=run, now=now):
        return applied  # no retry will come, so no retrying event
    if applied:
        _announce(conn, run=run, completion=completion, state=target, now=now)
        if completion.pause_schedule:
            pause_by_receiver(conn, run=run, status=completion.http_status, now=now)
    return applied


def _cancel_if_withdrawn(conn: apsw.Connection, *, run: ClaimedRun | RunningRun, now: int) -> bool:
    """A schedule paused or deleted while this attempt was in flight gets no retry behind
    the tenant's back: the run is cancelled, as the pause cancelled the schedule's other
    open runs. (A run replayed on an already paused schedule keeps its retries: the tenant
    asked for it.) True if it was cancelled."""
    target = check_transition(RunState.RETRY_WAIT, Transition.CANCEL)
    conn.execute(
        "UPDATE job_runs SET state = ?, finished_at = ?, updated_at = ?"
        f" WHERE id = ? AND state = '{RunState.RETRY_WAIT.value}' AND EXISTS"
        " (SELECT 1 FROM schedules s WHERE s.id = job_runs.schedule_id"
        " AND (s.paused = 1 OR s.deleted_at IS NOT NULL)"
        " AND MAX(s.updated_at, COALESCE(s.deleted_at, 0))"
        " >= (SELECT started_at FROM attempts WHERE run_id = ? AND attempt = ?))",
        (target.value, now, now, run.run_id, run.run_id, run.attempt),
    )
    return conn.changes() == 1


def _finish_attempt(
    conn: apsw.Connection,
    *,
    run: ClaimedRun,
    completion: Completion,
    outcome: AttemptOutcome,
    now: int,
) -> None:
    conn.execute(
        "UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, error = ?,"
        " latency_ms = ?, response_excerpt = ?"
        " WHERE run_id = ? AND attempt = ? AND lease_token = ?",
        (
            now,
            outcome.value,
            completion.http_status,
            completion.error,
            completion.latency_ms,
            completion.response_excerpt,
            run.run_id,
            run.attempt,
            run.lease_token,
        ),
    )


def _announce(
    conn: apsw.Connection, *, run: ClaimedRun, completion: Completion, state: RunState, now: int
) -> None:
    """The run event (contracts/events/schedule.run.*.json): a failure's ``reason`` is its
    failure reason; a retry's is the transport failure class, if there was one."""
    succeeded = state is RunState.SUCCEEDED
    reason = completion.failure_reason if state is RunState.FAILED else completion.failure_class
    append_event(
        conn,
        tenant_id=run.tenant_id,
        type=EVENT_FOR[state],
        now=now,
        schedule_id=run.schedule_id,
        run_id=run.run_id,
        data=run_event_data(
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            key=run.idempotency_key,
            status=completion.http_status,
            error=None if succeeded else completion.error,  # the attempt row keeps it
            reason=None if succeeded else reason,
            next_attempt_at=completion.due_at,
        ),
    )


def pause_by_receiver(
    conn: apsw.Connection, *, run: ClaimedRun, status: int | None, now: int
) -> bool:
    """The receiver answered 410 Gone: pause the schedule (version + 1), withdraw its open
    runs and record ``schedule.paused_by_receiver``. False if it was already paused."""
    conn.execute(
        "UPDATE schedules SET paused = 1, version = version + 1, updated_at = ?"
        " WHERE id = ? AND paused = 0 AND deleted_at IS NULL",
        (now, run.schedule_id),
    )
    if conn.changes() != 1:
        return False
    withdraw_open_runs(conn, schedule_id=run.schedule_id, now=now)
    append_event(
        conn,
        tenant_id=run.tenant_id,
        type=EventType.SCHEDULE_PAUSED_BY_RECEIVER,
        now=now,
        schedule_id=run.schedule_id,
        run_id=run.run_id,
        data={"run_id": run.run_id, "status": status},
    )
    return True


# --- reclaim ---------------------------------------------------------------------------


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
    max_attempts: int


_RUNNING_ROWS = (
    "SELECT r.id, r.tenant_id, r.schedule_id, r.scheduled_for, r.idempotency_key, r.attempt,"
    " r.lease_token, s.max_attempts, r.attempt_base, COALESCE(r.budget_from, r.scheduled_for)"
    " FROM job_runs r JOIN schedules s ON s.id = r.schedule_id"
    f" WHERE r.state = '{_RUNNING}'"
)


def _running_rows(
    conn: apsw.Connection, condition: str, params: tuple[object, ...]
) -> list[RunningRun]:
    return [
        RunningRun(
            run_id=rid,
            tenant_id=tenant,
            schedule_id=schedule,
            scheduled_for=sched_for,
            idempotency_key=key,
            attempt=attempt,
            budget=RetryBudget(attempt_base=base, window_start=window_start),
            lease_token=token,
            max_attempts=max_attempts,
        )
        for (
            rid,
            tenant,
            schedule,
            sched_for,
            key,
            attempt,
            token,
            max_attempts,
            base,
            window_start,
        ) in conn.execute(f"{_RUNNING_ROWS} AND {condition}", params)
    ]


def reclaim_previous(conn: apsw.Connection, *, incarnation_id: str, now: int) -> int:
    """Boot: every run earlier incarnations left ``running`` goes back to ``retry_wait``
    due now, its attempt ``abandoned``, without waiting for lease expiry (the lock file
    proves they are dead). The abandoned attempt is not charged to the run's budget; the
    run fails only past its retry window or after ``RESTART_LIMIT`` abandoned attempts in
    a row. Earlier incarnations are marked ended. Returns how many runs were reclaimed."""
    rows = _running_rows(conn, "(r.lease_owner IS NULL OR r.lease_owner != ?)", (incarnation_id,))
    for row in rows:
        abandon_run(
            conn,
            run=row,
            error="the appliance restarted during this attempt",
            now=now,
            restart=True,
        )
    conn.execute(
        "UPDATE incarnations SET ended_at = ? WHERE id != ? AND ended_at IS NULL",
        (now, incarnation_id),
    )
    return len(rows)


def reclaim_expired(conn: apsw.Connection, *, now: int, ceiling_ms: int, limit: int) -> int:
    """The reaper: reclaim running rows whose lease expired before ``now``, or that were
    claimed more than ``ceiling_ms`` ago (no attempt may run that long, whatever its
    heartbeats say). At most ``limit`` rows; returns how many."""
    rows = _running_rows(
        conn,
        "(r.lease_expires_at < ? OR r.updated_at < ?) ORDER BY r.lease_expires_at LIMIT ?",
        (now, now - ceiling_ms, limit),
    )
    for row in rows:
        abandon_run(conn, run=row, error="the lease expired before the attempt finished", now=now)
    return len(rows)


def earliest_lease_expiry(conn: apsw.Connection) -> int | None:
    """When the next lease lapses if nobody renews it (served by ``job_runs_leases``)."""
    row = conn.execute(
        f"SELECT MIN(lease_expires_at) FROM job_runs WHERE state = '{_RUNNING}'"
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def abandon_run(
    conn: apsw.Connection, *, run: RunningRun, error: str, now: int, restart: bool = False
) -> RunState:
    """Return one run whose executor died or lost its lease; fenced on its token.
    ``restart``: the whole appliance died (boot reclaim), so the attempt is not charged to
    the run's budget. Returns the new state (``retry_wait``, ``failed``, or ``cancelled``
    when its schedule was paused or deleted during the attempt)."""
    policy = retry_policy(run.max_attempts)
    if restart:
        decision = decide_after_restart(
            policy,
            abandoned_in_a_row=_abandoned_in_a_row(conn, run),
            scheduled_for_ms=run.budget.window_start,
            now_ms=now,
        )
    else:
        decision = decide_after_abandon(
            policy,
            attempt=run.budget.attempts_used(max(run.attempt, 1)),
            scheduled_for_ms=run.budget.window_start,
            now_ms=now,
        )
    transition = Transition.RECLAIM if decision.transition is Transition.RETRY else Transition.FAIL
    target = check_transition(RunState.RUNNING, transition)
    reason = None if decision.failure_reason is None else decision.failure_reason.value
    conn.execute(
        "UPDATE job_runs SET state = ?, due_at = COALESCE(?, due_at), lease_token = NULL,"
        " lease_expires_at = NULL, heartbeat_at = NULL, last_status = NULL, last_error = ?,"
        " failure_reason = ?, finished_at = ?, updated_at = ?, attempt_base = attempt_base + ?"
        f" WHERE id = ? AND lease_token = ? AND state = '{_RUNNING}'",
        (
            target.value,
            decision.due_at,
            error,
            reason,
            now if target in TERMINAL else None,
            now,
            int(restart),  # an uncharged attempt moves the budget's base past it
            run.run_id,
            run.lease_token,
        ),
    )
    expect_one(conn, f"reclaim of {run.run_id}")
    conn.execute(
        "UPDATE attempts SET outcome = ?, finished_at = ?, error = ?"
        " WHERE run_id = ? AND attempt = ? AND outcome IS NULL",
        (AttemptOutcome.ABANDONED.value, now, error, run.run_id, run.attempt),
    )
    if target is RunState.RETRY_WAIT and _cancel_if_withdrawn(conn, run=run, now=now):
        return RunState.CANCELLED  # paused or deleted meanwhile: no retry, as in complete_run
    append_event(
        conn,
        tenant_id=run.tenant_id,
        type=EVENT_FOR[target],
        now=now,
        schedule_id=run.schedule_id,
        run_id=run.run_id,
        data=run_event_data(
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            key=run.idempotency_key,
            error=error,
            reason=reason or ABANDONED,
            next_attempt_at=decision.due_at,
        ),
    )
    return target


def _abandoned_in_a_row(conn: apsw.Connection, run: RunningRun) -> int:
    """How many attempts of ``run``'s current budget, the open one included, ended
    abandoned (or stale: a zombie's late answer) since its last answered attempt."""
    row = conn.execute(
        "SELECT COUNT(*) FROM attempts a WHERE a.run_id = ?1 AND a.started_at >= ?2"
        " AND (a.outcome IS NULL OR a.outcome IN ('abandoned', 'stale'))"
        " AND a.attempt > COALESCE((SELECT MAX(b.attempt) FROM attempts b WHERE b.run_id = ?1"
        " AND b.outcome IN ('ok', 'retryable', 'permanent')), 0)",
        (run.run_id, run.budget.window_start),
    ).fetchone()
    return max(int(row[0]) if row else 0, 1)
