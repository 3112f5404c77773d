"""Completion: an attempt's result applied to its run, fenced on the lease token
(ADR 0033 "Leases, heartbeats, fencing"; ADR 0032 "Outcomes").

Rules this module guards:

- **Fencing**: the write that moves a run out of ``running`` says ``AND lease_token = ?
  AND state = 'running'``. Zero rows changed → the attempt is recorded ``stale`` and
  nothing else changes (no event, no state).
- The retry decision arrives made (:mod:`appliance.core.retry`, in the
  :class:`Completion`): this module only applies it.
- **In batches.** :func:`complete_runs` applies the completions that finished together
  with one statement each for the fenced runs update, the attempts update and the
  events insert (each a :class:`~appliance.store.infra.connection.Batched`:
  ``executemany`` on SQLite, one statement over ``unnest(…)`` on PostgreSQL), instead of
  three or four statements each: the dispatcher's completions arrive together under
  load (``Database.write_batched``). Each completion comes out as :func:`complete_run`
  alone would leave it. A batch with a 410 Gone among it (which pauses a schedule, and
  may thereby withdraw another run of the batch) is applied one completion after the
  other, in order.
- **Isolation** (PostgreSQL, docs/adr/0044-postgresql-store.md): a batch of successes and
  failures runs ``READ COMMITTED``: the fenced ``UPDATE`` locks its run and checks the
  lease token again on a row another transaction changed, so a stale completion never
  lands. A batch with a retry or a 410 Gone runs ``SERIALIZABLE``: the retry's withdrawal
  check and the pause read the schedule, which a pause in flight may be changing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from appliance.core.runs import TERMINAL, AttemptOutcome, RunState, Transition, check_transition
from appliance.store.claims import ClaimedRun
from appliance.store.events import NewEvent, append_events
from appliance.store.infra.connection import (
    Batched,
    Connection,
    Isolation,
    isolation_by,
    unnested,
)
from appliance.store.pauses import pause_by_receiver
from appliance.store.runs import RUNNING_SQL, attempt_event, cancel_if_withdrawn


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The result of one attempt and what it does to the run (decided by core.retry)."""

    outcome: AttemptOutcome  # of the attempt: ok, retryable, permanent, or abandoned when
    # its executor cut it short for its lease (then transition RECLAIM or FAIL)
    transition: Transition  # SUCCEED, RETRY, RECLAIM or FAIL
    due_at: int | None  # the next attempt's due_at for RETRY
    failure_reason: str | None  # for FAIL
    http_status: int | None
    error: str | None
    latency_ms: int
    response_excerpt: str | None
    failure_class: str | None = None  # why no response came (connect, dns, timeout, ...)
    pause_schedule: bool = False  # 410 Gone: the receiver asked us to stop
    signed_at: int | None = None  # unix seconds the request was signed at (None: not built)


@dataclass(frozen=True, slots=True)
class Finished:
    """One attempt to record: its run, its result, and when it was recorded."""

    run: ClaimedRun
    completion: Completion
    now: int

    @property
    def target(self) -> RunState:
        return check_transition(RunState.RUNNING, self.completion.transition)


# Fenced on the lease token; RETURNING names the rows it moved (id and attempt: one run
# may be in a batch twice, a stale attempt beside its reclaimed successor).
_FENCED: Final = Batched(
    sqlite="UPDATE job_runs SET state = ?, due_at = COALESCE(?, due_at), lease_token = NULL,"
    " lease_expires_at = NULL, heartbeat_at = NULL, last_status = ?, last_error = ?,"
    " failure_reason = ?, finished_at = ?, updated_at = ?"
    f" WHERE id = ? AND lease_token = ? AND state = {RUNNING_SQL} RETURNING id, attempt",
    postgres="UPDATE job_runs SET state = v.state, due_at = COALESCE(v.due_at, job_runs.due_at),"
    " lease_token = NULL, lease_expires_at = NULL, heartbeat_at = NULL,"
    " last_status = v.last_status, last_error = v.last_error,"
    " failure_reason = v.failure_reason, finished_at = v.finished_at,"
    " updated_at = v.updated_at FROM (SELECT "
    + unnested(
        "state text, due_at bigint, last_status bigint, last_error text, failure_reason text,"
        " finished_at bigint, updated_at bigint, id text, lease_token text"
    )
    + ") AS v WHERE job_runs.id = v.id AND job_runs.lease_token = v.lease_token"
    f" AND job_runs.state = {RUNNING_SQL} RETURNING job_runs.id, job_runs.attempt",
)
# A stale answer keeps the reclaim's record (``reclaimed_at``, and its error when the
# answer has none): both facts stay on the row.
_FINISH_ATTEMPT: Final = Batched(
    sqlite="UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?,"
    " error = COALESCE(?, error), latency_ms = ?, response_excerpt = ?, signed_at = ?,"
    " reclaimed_at = COALESCE(reclaimed_at, ?)"
    " WHERE run_id = ? AND attempt = ? AND lease_token = ?",
    postgres="UPDATE attempts SET finished_at = v.finished_at, outcome = v.outcome,"
    " http_status = v.http_status, error = COALESCE(v.error, attempts.error),"
    " latency_ms = v.latency_ms, response_excerpt = v.response_excerpt,"
    " signed_at = v.signed_at, reclaimed_at = COALESCE(attempts.reclaimed_at, v.reclaimed_at)"
    " FROM (SELECT "
    + unnested(
        "finished_at bigint, outcome text, http_status bigint, error text, latency_ms bigint,"
        " response_excerpt text, signed_at bigint, reclaimed_at bigint, run_id text,"
        " attempt bigint, lease_token text"
    )
    + ") AS v WHERE attempts.run_id = v.run_id AND attempts.attempt = v.attempt"
    " AND attempts.lease_token = v.lease_token",
)


def _isolation(done: Sequence[Finished]) -> Isolation:
    """``SERIALIZABLE`` for a batch with a retry or a pause (the module's rules)."""
    reads_schedule = any(
        item.target is RunState.RETRY_WAIT or item.completion.pause_schedule for item in done
    )
    return Isolation.SERIALIZABLE if reads_schedule else Isolation.READ_COMMITTED


@isolation_by(lambda *, run, completion, now: _isolation([Finished(run, completion, now)]))
def complete_run(conn: Connection, *, run: ClaimedRun, completion: Completion, now: int) -> bool:
    """Apply an attempt's result, fenced on the lease token. False: the lease was lost,
    the attempt is recorded ``stale`` and nothing else changed."""
    (applied,) = complete_runs(conn, [Finished(run, completion, now)])
    return applied


@isolation_by(_isolation)
def complete_runs(conn: Connection, done: Sequence[Finished]) -> list[bool]:
    """:func:`complete_run` for each of ``done``, in batches (see the module rules): for
    each, True if applied, False if its lease was lost (recorded ``stale``)."""
    if len(done) > 1 and any(item.completion.pause_schedule for item in done):
        return [applied for item in done for applied in complete_runs(conn, [item])]
    moved = {tuple(row) for row in _FENCED.run(conn, [_fenced_row(item) for item in done])}
    applied = [(item.run.run_id, item.run.attempt) in moved for item in done]
    _FINISH_ATTEMPT.run(conn, [_attempt_row(i, ok) for i, ok in zip(done, applied, strict=True)])
    events: list[NewEvent] = []
    for item, ok in zip(done, applied, strict=True):
        run, completion, now = item.run, item.completion, item.now
        target = item.target
        if not ok or (
            target is RunState.RETRY_WAIT
            and cancel_if_withdrawn(conn, run_id=run.run_id, attempt=run.attempt, now=now)
        ):
            continue  # stale; or withdrawn: no retry will come, so no retrying event
        events.append(_event(item))
        if completion.pause_schedule:  # alone in its batch (above)
            append_events(conn, events)
            events = []
            pause_by_receiver(
                conn,
                tenant_id=run.tenant_id,
                schedule_id=run.schedule_id,
                run_id=run.run_id,
                status=completion.http_status,
                now=now,
            )
    append_events(conn, events)
    return applied


def _fenced_row(item: Finished) -> tuple[object, ...]:
    completion, now, target = item.completion, item.now, item.target
    return (
        target.value,
        completion.due_at,
        completion.http_status,
        completion.error,
        completion.failure_reason,
        now if target in TERMINAL else None,
        now,
        item.run.run_id,
        item.run.lease_token,
    )


def _attempt_row(item: Finished, applied: bool) -> tuple[object, ...]:
    completion, run = item.completion, item.run
    outcome = completion.outcome if applied else AttemptOutcome.STALE
    given_up = outcome is AttemptOutcome.ABANDONED  # by its own executor: taken back now
    return (
        item.now,
        outcome.value,
        completion.http_status,
        completion.error,
        completion.latency_ms,
        completion.response_excerpt,
        completion.signed_at,
        item.now if given_up else None,
        run.run_id,
        run.attempt,
        run.lease_token,
    )


def _event(item: Finished) -> NewEvent:
    """A failure's ``reason`` is its failure reason; a retry's is the transport failure
    class, if there was one; a success has neither (nor an error)."""
    completion, state = item.completion, item.target
    succeeded = state is RunState.SUCCEEDED
    reason = completion.failure_reason if state is RunState.FAILED else completion.failure_class
    if completion.outcome is AttemptOutcome.ABANDONED and reason is None:
        reason = AttemptOutcome.ABANDONED.value  # as a reclaim's event says
    return attempt_event(
        run=item.run,
        state=state,
        now=item.now,
        status=completion.http_status,
        error=None if succeeded else completion.error,  # the attempt row keeps it
        reason=None if succeeded else reason,
        next_attempt_at=completion.due_at,
    )
