"""Runs a tenant asks for: a manual trigger of a schedule, and a replay of a finished run
(ADR 0037: a double-click is one occurrence; ADR 0033: a replay is the same run).

Rules this module guards:

- A trigger is an occurrence at ``now`` floored to the second, due now, inserted like
  any planned one (:func:`appliance.store.materialise.insert_runs`): two triggers within
  one second are the same occurrence, so the second finds the first.
- A replay reopens a *finished* run as ``pending``, due now: same id, same key, attempt
  numbers keep counting, and a fresh attempt budget and retry window start now
  (:class:`appliance.core.retry.RetryBudget`). A deleted schedule never fires again, not
  even an old occurrence.
- A **bulk replay** (by ids or by filter) is one write transaction and reopens each run as
  a single replay does, but paced: the runs become due one after another,
  ``1 / rate_per_second`` apart, oldest occurrence first, after the tenant's replayed runs
  still waiting. The claim takes a tenant's runs earliest ``due_at`` first, so the
  tenant's scheduled runs are never queued behind more than a pace's worth of replays.
- By ids it is all or nothing: an unknown id (or another tenant's) answers NotFound, an
  open run or one of a deleted schedule Conflict, each naming every such id. By filter it
  reads at most :data:`MAX_REPLAY_MATCH` runs (more: ValidationError, narrow the filter);
  of those it replays the finished runs of live schedules and counts the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from appliance.core.runs import (
    RunState,
    Transition,
    Trigger,
    check_transition,
    occurrence_run,
    sources,
)
from appliance.core.timing import previous_occurrence
from appliance.errors import Conflict, NotFound, StoreError, ValidationError
from appliance.store.infra.connection import Connection
from appliance.store.materialise import insert_runs, schedule_body_digest
from appliance.store.run_search import RunFilter, search_runs
from appliance.store.runs import CLAIMABLE_SQL, RunRecord, get_run, must_get_run
from appliance.store.schedules import get_schedule, require_schedule

MAX_REPLAY_IDS: Final = 1000  # run ids in one bulk replay request
MAX_REPLAY_MATCH: Final = 10_000  # runs one filtered replay may match (one transaction)
_PENDING: Final = f"'{RunState.PENDING.value}'"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayCount:
    """What a bulk replay did: ``matched`` runs, of which ``replayed`` were reopened; the
    others were still ``open`` (they will be delivered anyway) or belong to a deleted
    schedule (``schedule_deleted``: never fired again)."""

    matched: int
    replayed: int
    open: int
    schedule_deleted: int


def trigger_schedule(
    conn: Connection, *, tenant_id: str, schedule_id: str, now: int
) -> tuple[RunRecord, bool]:
    """A manual occurrence of a live schedule at ``now`` (whole second), due now:
    ``(run, created)``; ``created`` is False when this second was already triggered."""
    schedule = require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    scheduled_for = now - now % 1000
    run = occurrence_run(
        schedule_id=schedule.id,
        tenant_id=schedule.tenant_id,
        schedule_version=schedule.version,
        scheduled_for=scheduled_for,
        due_at=now,
        state=RunState.PENDING,
        trigger=Trigger.MANUAL,
        body_digest=schedule_body_digest(
            conn,
            schedule,
            scheduled_for=scheduled_for,
            previous=previous_occurrence(schedule.spec, scheduled_for),
        ),
    )
    created = bool(insert_runs(conn, [run], now=now))
    return must_get_run(conn, tenant_id=tenant_id, run_id=run.id), created


def replay_run(conn: Connection, *, tenant_id: str, run_id: str, now: int) -> RunRecord:
    """Reopen a finished run of a live schedule as ``pending``, due now. NotFound;
    Conflict if the run is not finished or its schedule was deleted."""
    run = get_run(conn, tenant_id=tenant_id, run_id=run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    if get_schedule(conn, tenant_id=tenant_id, schedule_id=run.schedule_id) is None:
        raise Conflict(f"run {run_id} belongs to a deleted schedule; it cannot be replayed")
    if run.state not in sources(Transition.REPLAY):
        raise Conflict(
            f"run {run_id} is {run.state}; only finished runs (succeeded, failed, missed,"
            " cancelled) can be replayed"
        )
    _reopen(conn, [(run, now)], now=now)
    return must_get_run(conn, tenant_id=tenant_id, run_id=run_id)


def replay_runs(
    conn: Connection,
    *,
    tenant_id: str,
    run_ids: Sequence[str],
    now: int,
    rate_per_second: int,
) -> ReplayCount:
    """Reopen every run of ``run_ids`` (paced), or none: NotFound naming the ids that are
    not this tenant's runs, Conflict naming those open or of a deleted schedule."""
    wanted = list(dict.fromkeys(run_ids))
    found = {rid: get_run(conn, tenant_id=tenant_id, run_id=rid) for rid in wanted}
    unknown = [rid for rid, run in found.items() if run is None]
    if unknown:
        raise NotFound(f"no runs {', '.join(unknown)}; nothing was replayed")
    runs = [run for run in found.values() if run is not None]
    live = _live_schedules(conn, tenant_id, runs)
    still_open = [r.id for r in runs if r.state not in sources(Transition.REPLAY)]
    deleted = [r.id for r in runs if r.schedule_id not in live]
    if still_open or deleted:
        reasons = []
        if still_open:
            reasons.append(f"still open (pending, running or retry_wait): {', '.join(still_open)}")
        if deleted:
            reasons.append(f"of a deleted schedule: {', '.join(deleted)}")
        raise Conflict(f"runs {'; '.join(reasons)}; nothing was replayed")
    _reopen_paced(conn, tenant_id, runs, now=now, rate_per_second=rate_per_second)
    return ReplayCount(matched=len(runs), replayed=len(runs), open=0, schedule_deleted=0)


def replay_matching(
    conn: Connection,
    *,
    tenant_id: str,
    where: RunFilter,
    as_of: int,
    now: int,
    rate_per_second: int,
) -> ReplayCount:
    """Reopen (paced) the finished runs of live schedules among the tenant's runs that
    match ``where`` and were last changed at or before ``as_of``; ValidationError when more
    than :data:`MAX_REPLAY_MATCH` match."""
    matched = search_runs(
        conn, tenant_id=tenant_id, where=where, limit=MAX_REPLAY_MATCH + 1, as_of=as_of
    )
    if len(matched) > MAX_REPLAY_MATCH:
        raise ValidationError.single(
            "filter",
            f"matches more than {MAX_REPLAY_MATCH} runs, the most one replay takes; narrow it"
            " (since/until, state, schedule_id) and replay in parts",
        )
    finished = [r for r in matched if r.state in sources(Transition.REPLAY)]
    live = _live_schedules(conn, tenant_id, finished)
    replayable = [r for r in finished if r.schedule_id in live]
    _reopen_paced(conn, tenant_id, replayable, now=now, rate_per_second=rate_per_second)
    return ReplayCount(
        matched=len(matched),
        replayed=len(replayable),
        open=len(matched) - len(finished),
        schedule_deleted=len(finished) - len(replayable),
    )


def _live_schedules(conn: Connection, tenant_id: str, runs: Sequence[RunRecord]) -> set[str]:
    return {
        schedule_id
        for schedule_id in {r.schedule_id for r in runs}
        if get_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id) is not None
    }


def _reopen_paced(
    conn: Connection,
    tenant_id: str,
    runs: Sequence[RunRecord],
    *,
    now: int,
    rate_per_second: int,
) -> None:
    """Reopen ``runs`` oldest occurrence first, due ``1 / rate_per_second`` apart, the
    first one step after the tenant's last replayed run still waiting (or now)."""
    step = 1000 / rate_per_second
    start = paced_start(conn, tenant_id, now=now, step=step)
    ordered = sorted(runs, key=lambda r: (r.scheduled_for, r.id))
    _reopen(conn, [(run, start + int(n * step)) for n, run in enumerate(ordered)], now=now)


def paced_start(conn: Connection, tenant_id: str, *, now: int, step: float) -> int:
    """When the next paced run of a tenant may be due: one ``step`` (ms) after its last
    replayed or backfilled run still waiting (those carry ``budget_from``), or now."""
    waiting = conn.execute(
        f"SELECT MAX(due_at) FROM job_runs WHERE tenant_id = ? AND state IN {CLAIMABLE_SQL}"
        f" AND state = {_PENDING} AND budget_from IS NOT NULL",
        (tenant_id,),
    ).fetchone()
    return now if waiting is None or waiting[0] is None else max(now, int(waiting[0] + step))


def _reopen(conn: Connection, runs: Sequence[tuple[RunRecord, int]], *, now: int) -> None:
    """Finished runs back to ``pending``, each due at its ``due_at``, with a fresh attempt
    budget and retry window from then; one statement for all."""
    before = conn.total_changes()
    conn.executemany(
        "UPDATE job_runs SET state = ?, due_at = ?, failure_reason = NULL, finished_at = NULL,"
        " attempt_base = attempt, budget_from = ?, updated_at = ? WHERE id = ? AND state = ?",
        [
            (
                check_transition(run.state, Transition.REPLAY).value,
                due_at,
                due_at,
                now,
                run.id,
                run.state.value,
            )
            for run, due_at in runs
        ],
    )
    if conn.total_changes() - before != len(runs):
        # Inside one BEGIN IMMEDIATE transaction a row read a moment ago cannot change.
        raise StoreError(f"replay of {len(runs)} runs: a row changed under the writer")
