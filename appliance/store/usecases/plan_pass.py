"""One planner pass, inside the caller's write transaction: a schedule's occurrences from
its cursor become run rows, exactly once (ADR 0033 "Planning", ADR 0034). The service that
runs passes — sleeping, waking, watching the clock — is :mod:`appliance.engine.planner`.

Rules this module guards:

- A pass (:func:`plan_once`) picks unpaused schedules whose cursor is within
  ``lookahead_ms`` of now (bounded batch, earliest first), enumerates occurrences **from
  the cursor forward — never from "now"** — inserts one row per occurrence with ``ON
  CONFLICT DO NOTHING``, and advances the cursor by compare-and-set in the same
  transaction. Two independent guards: a backwards clock jump finds no cursor due, and a
  racing planner (another process on the same file) conflicts on the unique index.
- An occurrence is *misfired* when planning finds it more than ``misfire_ms`` past its
  ``due_at`` (the appliance was down). What the schedule's catch-up policy makes of it is
  decided by :func:`appliance.core.catch_up.judge` (``all``: delivered inside the window;
  ``latest``: only the newest misfire inside it; ``skip``: none); this module bounds the
  late deliveries to ``max_catchup`` per schedule per pass (the rest wait for the next
  pass, judged again then) and writes the verdicts. Everything not delivered becomes a
  ``missed`` row with a ``schedule.run.missed`` event — nothing is silently lost. Past
  ``max_missed_events`` missed rows of one schedule in one pass, one summary event carries
  the count and the first/last instants.
- Work is bounded per pass (``batch`` schedules, ``max_occurrences`` per schedule); a
  pass that hits a bound says so (``more``) and the service plans again at once.
- **Settling before a change** (:func:`settle_schedule`): an edit, pause or delete changes
  what a schedule plans from now on. If the planner lags behind that schedule (after a
  forward clock step, before its next pass), the occurrences already due under the old
  spec are first planned as a pass would plan them — delivered or ``missed`` by the same
  catch-up rules — so none of them is left without a row when the cursor is re-derived.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from appliance.core.catch_up import MissReason, is_misfire, judge
from appliance.core.events import EventType, JsonScalar
from appliance.core.instants import format_scheduled_for
from appliance.core.jitter import PlannedOccurrence, planned_occurrences, planned_timing
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.occurrence_fanout import FannedOut
from appliance.core.runs import NewRun, RunState, Trigger, occurrence_run
from appliance.core.schedules import Overlap
from appliance.core.timing import is_plain_cron, previous_occurrence
from appliance.errors import ValidationError
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.materialise import insert_runs, run_body_digest, store_body
from appliance.store.planning import (
    CursorMove,
    DueSchedule,
    advance_cursors,
    due_cursor,
    due_cursors,
    earliest_cursor,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerConfig:
    lookahead_ms: int = 2_000  # materialise occurrences this far ahead of their time
    batch: int = 500  # schedules per pass
    misfire_ms: int = 60_000  # later than this past due_at when planned: a misfire
    max_catchup: int = 100  # late deliveries per schedule per pass (policy `all`)
    max_occurrences: int = 10_000  # occurrences examined per schedule per pass
    max_missed_events: int = 100  # beyond this, one summary event per schedule and pass
    max_sleep_s: float = 60.0  # never sleep longer: guards against wall-clock jumps
    clock_jump_ms: int = 2_000  # wall vs monotonic divergence that counts as a jump


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanResult:
    schedules: int  # schedules looked at
    materialised: int  # new runs to deliver
    missed: int  # new `missed` rows
    more: bool  # a bound was hit: plan again at once
    next_fire_at: int | None  # earliest cursor of any plannable schedule after the pass


def plan_once(
    conn: Connection,
    *,
    now: int,
    config: PlannerConfig,
    occurrences: OccurrenceCache | None = None,
) -> PlanResult:
    """One planner pass inside the caller's write transaction (``db.write(plan_once, …)``).
    ``occurrences``: the planner's cache, kept across passes (None: one for this pass).

    Every due schedule's rows are worked out first; then all of them are inserted by one
    batched statement, all cursors moved by another, and the missed events written,
    schedule by schedule in cursor order (the order a row-by-row pass wrote them)."""
    due = due_cursors(conn, horizon=now + config.lookahead_ms, limit=config.batch)
    work = _PassWork(
        conn,
        now=now,
        config=config,
        occurrences=OccurrenceCache() if occurrences is None else occurrences,
    )
    plans = [_plan_schedule(work, schedule) for schedule in due]
    materialised, missed = _write(conn, plans, now=now, config=config)
    return PlanResult(
        schedules=len(due),
        materialised=materialised,
        missed=missed,
        more=len(due) >= config.batch or any(plan.more for plan in plans),
        next_fire_at=earliest_cursor(conn),
    )


def settle_schedule(
    conn: Connection, *, schedule_id: str, now: int, config: PlannerConfig | None = None
) -> bool:
    """Plan one schedule's occurrences due at or before ``now`` that the planner has not
    reached yet, as passes would (catch-up rules included), before an edit, pause or
    delete changes what it plans. Nothing past ``now`` is planned. True if its cursor
    moved (the caller re-reads the schedule)."""
    config = replace(config or PlannerConfig(), lookahead_ms=0)
    work = _PassWork(conn, now=now, config=config, occurrences=OccurrenceCache())
    moved = False
    while (schedule := due_cursor(conn, schedule_id=schedule_id, horizon=now)) is not None:
        plan = _plan_schedule(work, schedule)
        _write(conn, [plan], now=now, config=config)
        moved = moved or plan.move is not None
        if not plan.more:
            break
    return moved


def _write(
    conn: Connection, plans: Sequence[_SchedulePlan], *, now: int, config: PlannerConfig
) -> tuple[int, int]:
    """Insert the plans' rows in one batch, move their cursors, announce what was missed.
    Returns (runs to deliver, missed rows) actually created."""
    created = insert_runs(conn, [run for plan in plans for run in plan.runs], now=now)
    advance_cursors(conn, [plan.move for plan in plans if plan.move is not None])
    materialised = missed = 0
    for plan in plans:
        missed_rows = []
        for run, reason in zip(plan.runs, plan.reasons, strict=True):
            if run.id not in created:
                continue  # the occurrence already had its run: nothing new to count or tell
            if reason is None:
                materialised += 1
            else:
                missed_rows.append((run.scheduled_for, run.id, reason))
        _record_missed(conn, plan.schedule, missed_rows, now=now, limit=config.max_missed_events)
        missed += len(missed_rows)
    return materialised, missed


class _PassWork:
    """What one pass shares between its schedules: the planner's occurrence cache (specs
    and occurrences, kept across passes), the occurrences of each distinct (spec, cursor)
    read from it once and fanned out to every schedule sharing them, and the digest of each
    distinct body (stored once per pass, not once per schedule)."""

    def __init__(
        self, conn: Connection, *, now: int, config: PlannerConfig, occurrences: OccurrenceCache
    ) -> None:
        self.conn = conn
        self.now = now
        self.config = config
        self.shared = occurrences
        # A schedule reads at most max_occurrences + 1 instants up to the horizon.
        self.fanned = FannedOut(
            occurrences, horizon=now + config.lookahead_ms, limit=config.max_occurrences + 1
        )
        self._digests: dict[tuple[str, bytes], str] = {}

    def digest(self, content_type: str, body: bytes) -> str:
        digest = self._digests.get((content_type, body))
        if digest is None:
            digest = store_body(self.conn, content_type=content_type, body=body)
            self._digests[content_type, body] = digest
        return digest

    def rendered(self, schedule: DueSchedule, scheduled_for: int, previous: int | None) -> str:
        """The digest of one run's body rendered from the schedule's payload template."""
        return run_body_digest(
            self.conn,
            content_type=schedule.content_type,
            template=schedule.body,
            schedule_id=schedule.id,
            scheduled_for=scheduled_for,
            previous=previous,
        )


class _SchedulePlan(NamedTuple):
    """One schedule's share of a pass, before it is written (a named tuple: one per
    schedule per pass, cheaper to build than a frozen dataclass)."""

    schedule: DueSchedule
    runs: list[NewRun]  # every occurrence examined, in order
    reasons: list[MissReason | None]  # per run: None to deliver, else why it is missed
    move: CursorMove | None  # None: the cursor stays
    more: bool  # a per-schedule bound was hit


def _plan_schedule(work: _PassWork, schedule: DueSchedule) -> _SchedulePlan:
    try:
        stream = _stream(work, schedule)
    except ValidationError as exc:
        # Stored schedules were validated on write; a library upgrade can still change
        # what is valid. Stop planning it rather than fail every pass for every schedule.
        log.error("schedule %s can no longer be planned, stopping it: %s", schedule.id, exc)
        stop = CursorMove(schedule.id, schedule.cursor, None)
        return _SchedulePlan(schedule=schedule, runs=[], reasons=[], move=stop, more=False)
    return _materialise(work, schedule, stream)


def _stream(work: _PassWork, schedule: DueSchedule) -> Iterator[PlannedOccurrence]:
    """The schedule's occurrences from its cursor on. A plain cron schedule (no other
    kind, no bounds) takes the cron path directly: most schedules, and the hot one."""
    if is_plain_cron(schedule):
        return planned_occurrences(
            work.shared.spec(schedule.cron, schedule.timezone),
            schedule_id=schedule.id,
            jitter_seconds=schedule.jitter_seconds,
            after_ms=schedule.cursor - 1,
            shared=work.fanned,
        )
    return planned_timing(
        schedule,
        schedule_id=schedule.id,
        jitter_seconds=schedule.jitter_seconds,
        after_ms=schedule.cursor - 1,
        shared=work.fanned,
    )


def _materialise(
    work: _PassWork, schedule: DueSchedule, stream: Iterator[PlannedOccurrence]
) -> _SchedulePlan:
    """The rows of the occurrences from the cursor up to the lookahead horizon, each judged
    against the catch-up policy, within the per-schedule bounds."""
    now, config = work.now, work.config
    horizon = now + config.lookahead_ms
    digest = None if schedule.templated else work.digest(schedule.content_type, schedule.body)
    window_ms = schedule.catchup_window_seconds * 1000
    runs: list[NewRun] = []
    reasons: list[MissReason | None] = []
    late, more = 0, False
    current = next(stream, None)
    # A template's previous occurrence: looked up once, then the stream's own order.
    previous = (
        previous_occurrence(schedule, current.scheduled_for, shared=work.shared)
        if digest is None and current is not None and current.scheduled_for <= horizon
        else None
    )
    while current is not None and current.scheduled_for <= horizon:
        following = next(stream, None)
        reason = judge(
            current.due_at,
            None if following is None else following.due_at,
            now=now,
            policy=schedule.catchup_policy,
            window_ms=window_ms,
            misfire_ms=config.misfire_ms,
        )
        is_late = reason is None and is_misfire(
            current.due_at, now=now, misfire_ms=config.misfire_ms
        )
        if len(runs) >= config.max_occurrences or (is_late and late >= config.max_catchup):
            more = True
            break
        run_digest = digest or work.rendered(schedule, current.scheduled_for, previous)
        runs.append(_planned_run(schedule, current, reason, run_digest))
        reasons.append(reason)
        late += is_late
        previous, current = current.scheduled_for, following
    new_cursor = None if current is None else current.scheduled_for
    move = (
        None
        if new_cursor == schedule.cursor
        else CursorMove(schedule.id, schedule.cursor, new_cursor)
    )
    return _SchedulePlan(schedule=schedule, runs=runs, reasons=reasons, move=move, more=more)


def _planned_run(
    schedule: DueSchedule,
    occurrence: PlannedOccurrence,
    reason: MissReason | None,
    digest: str,
) -> NewRun:
    return occurrence_run(
        schedule_id=schedule.id,
        tenant_id=schedule.tenant_id,
        schedule_version=schedule.version,
        scheduled_for=occurrence.scheduled_for,
        due_at=occurrence.due_at,
        state=RunState.PENDING if reason is None else RunState.MISSED,
        trigger=Trigger.SCHEDULE,
        body_digest=digest,
        overlap=None if schedule.overlap == Overlap.ALLOW else schedule.overlap,
        missed_reason=None if reason is None else str(reason),
    )


def _record_missed(
    conn: Connection,
    schedule: DueSchedule,
    missed: list[tuple[int, str, MissReason]],
    *,
    now: int,
    limit: int,
) -> None:
    """One ``schedule.run.missed`` event per missed row; past ``limit`` rows, one summary
    event per reason instead (contracts/events/schedule.run.missed.json)."""
    if len(missed) <= limit:
        for scheduled_for, run_id, reason in missed:
            data = {"scheduled_for": format_scheduled_for(scheduled_for), "reason": str(reason)}
            _missed_event(conn, schedule, run_id=run_id, data=data, now=now)
        return
    for reason in MissReason:
        instants = [sched for sched, _, why in missed if why is reason]
        if instants:
            summary: dict[str, JsonScalar] = {
                "count": len(instants),
                "first_scheduled_for": format_scheduled_for(instants[0]),
                "last_scheduled_for": format_scheduled_for(instants[-1]),
                "reason": str(reason),
            }
            _missed_event(conn, schedule, run_id=None, data=summary, now=now)


def _missed_event(
    conn: Connection,
    schedule: DueSchedule,
    *,
    run_id: str | None,
    data: Mapping[str, JsonScalar],
    now: int,
) -> None:
    append_event(
        conn,
        tenant_id=schedule.tenant_id,
        type=EventType.RUN_MISSED,
        now=now,
        schedule_id=schedule.id,
        run_id=run_id,
        data=data,
    )
