"""The planner: turns each schedule's occurrences into run rows, exactly once (ADR 0033).

Rules (the "why" is ADR 0033 "Planning" and ADR 0034's exactly-once materialisation):

- One write transaction per pass (:func:`plan_once`): pick unpaused schedules whose cursor
  is within ``lookahead_ms`` of now (bounded batch, earliest first), enumerate occurrences
  **from the cursor forward — never from "now"** — insert one row per occurrence with
  ``ON CONFLICT DO NOTHING``, and advance the cursor by compare-and-set in the same
  transaction. Two independent guards: a backwards clock jump finds no cursor due, and a
  racing planner (another process on the same file) conflicts on the unique index.
- An occurrence is *misfired* when planning finds it more than ``misfire_ms`` past its
  ``due_at`` (the appliance was down). Catch-up policy per schedule:
  ``all`` delivers each misfired occurrence inside the catch-up window, oldest first, at
  most ``max_catchup`` per schedule per pass (the rest wait for the next pass);
  ``latest`` delivers only the newest misfired occurrence inside the window; ``skip``
  none. Everything not delivered becomes a ``missed`` row with a ``schedule.run.missed``
  event — nothing is silently lost. Past ``max_missed_events`` missed rows of one schedule
  in one pass, one summary event carries the count and the first/last instants.
- Work is bounded per pass (``batch`` schedules, ``max_occurrences`` per schedule); a
  pass that hits a bound says so (``more``) and the service plans again at once.
- The service sleeps until the earliest cursor minus the lookahead, a nudge, or
  ``max_sleep_s`` (a guard against wall-clock jumps), and compares wall-clock progress with
  trio's monotonic clock on every loop: a divergence over ``clock_jump_ms`` is recorded as
  ``clock.jump_detected`` and logged, then planning carries on from the cursors.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import trio

from appliance.clock import WallClock
from appliance.core.events import EventType, JsonScalar
from appliance.core.instants import format_scheduled_for
from appliance.core.jitter import PlannedOccurrence, planned_occurrences, planned_timing
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.runs import NewRun, RunState, Trigger, occurrence_run
from appliance.core.schedules import CatchupPolicy, Overlap
from appliance.core.timing import is_plain_cron, previous_occurrence
from appliance.engine.wakeup import Wakeup
from appliance.errors import ValidationError
from appliance.store.database import Connection, Database
from appliance.store.events import SYSTEM_TENANT, append_event
from appliance.store.materialise import insert_runs, run_body_digest, store_body
from appliance.store.planning import (
    CursorMove,
    DueSchedule,
    advance_cursors,
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


class MissReason(enum.StrEnum):
    OUTSIDE_WINDOW = "outside_catchup_window"  # older than the schedule's catch-up window
    SKIPPED = "catchup_skip"  # policy `skip`
    SUPERSEDED = "catchup_latest_superseded"  # policy `latest`: a newer one was delivered


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
    return PlanResult(
        schedules=len(due),
        materialised=materialised,
        missed=missed,
        more=len(due) >= config.batch or any(plan.more for plan in plans),
        next_fire_at=earliest_cursor(conn),
    )


def judge(
    occurrence: PlannedOccurrence,
    following: PlannedOccurrence | None,
    *,
    now: int,
    policy: CatchupPolicy,
    window_ms: int,
    misfire_ms: int,
) -> MissReason | None:
    """None if the occurrence is to be delivered, else why it is missed. ``following`` is
    the next occurrence (``latest`` delivers a misfire only if the next one is on time)."""
    lateness = now - occurrence.due_at
    if lateness <= misfire_ms:
        return None
    if lateness > window_ms:
        return MissReason.OUTSIDE_WINDOW
    if policy is CatchupPolicy.ALL:
        return None
    if policy is CatchupPolicy.SKIP:
        return MissReason.SKIPPED
    newer_misfire = following is not None and now - following.due_at > misfire_ms
    return MissReason.SUPERSEDED if newer_misfire else None


class _PassWork:
    """What one pass shares between its schedules: the planner's occurrence cache (specs
    and occurrences, kept across passes) and the digest of each distinct body (stored once
    per pass, not once per schedule)."""

    def __init__(
        self, conn: Connection, *, now: int, config: PlannerConfig, occurrences: OccurrenceCache
    ) -> None:
        self.conn = conn
        self.now = now
        self.config = config
        self.shared = occurrences
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
            shared=work.shared,
        )
    return planned_timing(
        schedule,
        schedule_id=schedule.id,
        jitter_seconds=schedule.jitter_seconds,
        after_ms=schedule.cursor - 1,
        shared=work.shared,
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
            current,
            following,
            now=now,
            policy=schedule.catchup_policy,
            window_ms=window_ms,
            misfire_ms=config.misfire_ms,
        )
        is_late = reason is None and now - current.due_at > config.misfire_ms
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


def record_clock_jump(
    conn: Connection, *, wall_delta_ms: int, monotonic_delta_ms: int, now: int
) -> None:
    append_event(
        conn,
        tenant_id=SYSTEM_TENANT,
        type=EventType.CLOCK_JUMP_DETECTED,
        now=now,
        data={
            "wall_delta_ms": wall_delta_ms,
            "monotonic_delta_ms": monotonic_delta_ms,
            "divergence_ms": wall_delta_ms - monotonic_delta_ms,
        },
    )


class Planner:
    """The planning service: a short loop around :meth:`run_once`."""

    def __init__(
        self,
        *,
        db: Database,
        clock: WallClock,
        wakeup: Wakeup,
        on_planned: Callable[[], None],
        config: PlannerConfig,
    ) -> None:
        self._db = db
        self._clock = clock
        self._wakeup = wakeup
        self._on_planned = on_planned
        self._config = config
        self._occurrences = OccurrenceCache()  # used only inside its passes' transactions
        self._last_seen: tuple[int, float] | None = None  # (wall ms, trio seconds)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            deadline = await self.run_once()
            await self._wakeup.wait(deadline)

    async def run_once(self) -> float:
        """Check the clock, plan one pass, nudge the dispatcher if runs appeared. Returns
        the trio deadline for the next pass."""
        await self._check_clock()
        now = self._clock.now_ms()
        result = await self._db.write(
            plan_once, now=now, config=self._config, occurrences=self._occurrences
        )
        if result.materialised:
            self._on_planned()
        return trio.current_time() + self._sleep_s(result, now)

    def _sleep_s(self, result: PlanResult, now: int) -> float:
        if result.more:
            return 0.0
        if result.next_fire_at is None:
            return self._config.max_sleep_s
        wait_ms = result.next_fire_at - self._config.lookahead_ms - now
        return min(max(wait_ms, 0) / 1000, self._config.max_sleep_s)

    async def _check_clock(self) -> None:
        wall, mono = self._clock.now_ms(), trio.current_time()
        previous, self._last_seen = self._last_seen, (wall, mono)
        if previous is None:
            return
        wall_delta, mono_delta = wall - previous[0], round((mono - previous[1]) * 1000)
        if abs(wall_delta - mono_delta) > self._config.clock_jump_ms:
            log.warning(
                "wall clock jumped by %+d ms; re-planning from the cursors", wall_delta - mono_delta
            )
            await self._db.write(
                record_clock_jump,
                wall_delta_ms=wall_delta,
                monotonic_delta_ms=mono_delta,
                now=wall,
            )
