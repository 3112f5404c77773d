"""Scenario 10 — model-based testing of the store's run lifecycle (Hypothesis stateful).

A ``RuleBasedStateMachine`` drives the real store functions synchronously
(``Database(threaded=False)``, one write transaction per call, as the services issue
them) in random order: plan (passes repeated until the planner reports no ``more``, as the
service does), claim, heartbeat, complete (ok, retry, fail — by the live holder or by a
zombie whose lease was taken away), crash (a new incarnation and ``reclaim_previous``),
the reaper, wall-clock steps forward and backward, edit (cron, body or catch-up policy),
pause, resume and replay.

The model keeps, per schedule, its **segments**: the spans during which it was unpaused
under one timing spec. A segment starts at creation, at a resume, or at an edit of a
re-planning field (cron, body) — the store re-derives the cursor there to the first
occurrence strictly after that instant — and ends at a pause or at the next timing edit.
Each segment also remembers how far planning has *covered* it: the largest ``now`` of a
completed plan (passes until no ``more``) while it was open — and the instant it
ended, since an edit or pause first plans what is already due
(``store.schedules.settled``). Occurrences are computed by
the model itself, by arithmetic (every cron used fires on multiples of a period in UTC).

Invariants, checked after every step:

1. **≤ 1 row per occurrence** ``(schedule_id, scheduled_for)``.
2. **Legal transitions only.** Between two steps each row either keeps its state or makes
   one move of ``appliance.core.runs.TRANSITIONS``; new rows appear ``pending`` or
   ``missed``; a row disappears only when an edit or pause withdraws it (it was open,
   never attempted, and its occurrence after the instant of the edit); attempt counts
   never go down and grow by one exactly when a row enters ``running``.
3. **Every covered past occurrence has a row, and every missed row has its event.** For
   each segment, every occurrence in ``(start, min(covered, end)]`` has a row (whatever its
   state), and each ``missed`` row is announced by a ``schedule.run.missed`` event — its
   own, or a summary of its schedule whose first..last range contains it. An ended
   segment is covered up to its end: no occurrence due before an edit or pause is left
   without a row, even when the planner lagged (after a forward clock step, or mid
   catch-up) — ``dropped_unplanned`` counts any that were, and must stay 0.
4. **The key never changes.** Each occurrence's run id and idempotency key are the same
   every time they are seen — across retries, reclaims, replays and withdraw/re-plan —
   and the key is the contract's ``sha256(schedule_id ‖ scheduled_for)``.
5. **Fencing.** A completion is applied exactly when its lease token is still the row's
   and the row is ``running``; otherwise it is recorded ``stale`` and the row is unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import apsw
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from appliance.core.ids import idempotency_key
from appliance.core.instants import format_scheduled_for, parse_instant
from appliance.core.retry import RetryPolicy
from appliance.core.runs import TRANSITIONS, AttemptOutcome, RunState, Transition
from appliance.core.schedules import CatchupPolicy, PayloadKind, ScheduleSpec
from appliance.engine.reaper import ReaperConfig, reap_once
from appliance.store.claims import ClaimedRun, claim_runs, renew_leases
from appliance.store.completions import Completion, complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.backend import Store
from appliance.store.infra.database import Database
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.pauses import pause_schedule, resume_schedule
from appliance.store.schedules import create_schedule, get_schedule, update_schedule
from appliance.store.tenants import create_tenant
from appliance.store.usecases.manual import replay_run, trigger_schedule
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.usecases.reclaim import reclaim_previous
from tests.chaos.recorder import publish
from tests.postgres_cluster import Cluster

if TYPE_CHECKING:
    from tests.chaos.conftest import Profile

T0 = parse_instant("2026-08-06T03:00:00Z")
SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
LEASE_MS = 30 * SECOND
CRONS = {  # cron -> period (ms): each fires on the UTC multiples of its period
    "* * * * *": MINUTE,
    "*/2 * * * *": 2 * MINUTE,
    "*/5 * * * *": 5 * MINUTE,
    "*/20 * * * * *": 20 * SECOND,
}
STEPS = (1 * SECOND, 20 * SECOND, 61 * SECOND, 5 * MINUTE, 2 * HOUR, -30 * SECOND, -10 * MINUTE)
STEPS = (*STEPS, -2 * HOUR)
LEGAL = {(source, target) for (source, _), target in TRANSITIONS.items()}
OPEN = {RunState.PENDING, RunState.RETRY_WAIT}
# Two moves in one transaction: a retry (or a reclaim) of a run whose schedule was paused
# or deleted during the attempt is cancelled at once (store.runs.cancel_if_withdrawn).
COMPOSED = {(RunState.RUNNING, RunState.CANCELLED)}

FIGURES: Counter[str] = Counter()


def occurrences(cron: str, after: int, until: int) -> range:
    """The model's own occurrences of ``cron`` in ``(after, until]``."""
    period = CRONS[cron]
    first = (after // period + 1) * period
    return range(first, until + 1, period)


@dataclass
class Segment:
    cron: str
    start: int  # occurrences strictly after this instant
    end: int | None = None  # paused or re-timed at this instant; None: still open
    covered: int | None = None  # the largest `now` of a completed plan while open

    def must_have_rows(self) -> range:
        if self.covered is None:
            return range(0)
        until = self.covered if self.end is None else min(self.covered, self.end)
        return occurrences(self.cron, self.start, until)

    def dropped(self) -> int:
        """Occurrences before the end that no plan reached (see the module docstring)."""
        if self.end is None:
            return 0
        reached = self.start if self.covered is None else max(self.start, self.covered)
        return len(occurrences(self.cron, reached, self.end))


@dataclass
class ModelSchedule:
    schedule_id: str
    cron: str
    paused: bool = False
    segments: list[Segment] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Row:
    run_id: str
    schedule_id: str
    scheduled_for: int
    key: str
    state: RunState
    attempt: int
    lease_token: str | None


def spec(cron: str, *, policy: str = "all") -> ScheduleSpec:
    return ScheduleSpec(
        name="model",
        cron=cron,
        timezone="UTC",
        target_url="https://tenant.example/hook",
        payload_kind=PayloadKind.JSON,
        body=b"{}",
        content_type="application/json",
        headers=(),
        jitter_seconds=0,
        catchup_policy=CatchupPolicy(policy),
        catchup_window_seconds=3600,
        retry=RetryPolicy(max_attempts=4),
        timeout_seconds=30,
        paused=False,
    )


def read_rows(conn: apsw.Connection) -> dict[str, Row]:
    return {
        str(rid): Row(
            run_id=str(rid),
            schedule_id=str(sid),
            scheduled_for=int(sched),
            key=str(key),
            state=RunState(str(state)),
            attempt=int(attempt),
            lease_token=None if token is None else str(token),
        )
        for rid, sid, sched, key, state, attempt, token in conn.execute(
            "SELECT id, schedule_id, scheduled_for, idempotency_key, state, attempt,"
            " lease_token FROM job_runs"
        )
    }


def missed_announcements(conn: apsw.Connection) -> tuple[set[str], list[tuple[str, int, int]]]:
    """Run ids with their own missed event, and (schedule, first, last) of summaries."""
    own: set[str] = set()
    summaries: list[tuple[str, int, int]] = []
    for sid, rid, data in conn.execute(
        "SELECT schedule_id, run_id, data FROM events WHERE type = 'schedule.run.missed'"
    ):
        if rid is not None:
            own.add(str(rid))
            continue
        parsed: dict[str, Any] = json.loads(str(data))
        first = parse_instant(parsed["first_scheduled_for"])
        last = parse_instant(parsed["last_scheduled_for"])
        summaries.append((str(sid), first, last))
    return own, summaries


def sqlite_store() -> tuple[Store, Callable[[], None]]:
    """A fresh SQLite file: the store, and what removes it."""
    folder = tempfile.TemporaryDirectory(prefix="steeple-model-")
    db = Database.open(Path(folder.name) / "steeple.db", threaded=False, readers=1)
    return db, folder.cleanup


class StoreLifecycle(RuleBasedStateMachine):
    # Each example's fresh store: a SQLite file, or a PostgreSQL database (the test's
    # second parameter, which sets this on a subclass).
    new_store: ClassVar[Callable[[], tuple[Store, Callable[[], None]]]] = staticmethod(sqlite_store)

    def __init__(self) -> None:
        super().__init__()
        self.db, self._remove = self.new_store()
        self.now = T0
        self.tenant = self.db.write_now(create_tenant, name="model", now=T0).tenant_id
        self.owner = self.db.write_now(register_incarnation, pid=1, now=T0)
        self.schedules: list[ModelSchedule] = []
        self.held: list[ClaimedRun] = []
        self.rows: dict[str, Row] = {}
        self.identity: dict[tuple[str, int], tuple[str, str]] = {}
        self.withdrawable_after: int | None = None  # set by an edit or pause step
        FIGURES["examples"] += 1

    def teardown(self) -> None:
        FIGURES["dropped_unplanned"] += sum(
            seg.dropped() for s in self.schedules for seg in s.segments
        )
        FIGURES["rows"] += len(self.rows)
        self.db.close()
        self._remove()

    def order(self, run: Row | ClaimedRun) -> tuple[int, int]:
        """A draw order that does not depend on random ids (Hypothesis replays draws)."""
        index = [m.schedule_id for m in self.schedules].index(run.schedule_id)
        return index, run.scheduled_for

    def write(self, fn: Any, **kw: Any) -> Any:
        FIGURES["steps"] += 1
        return self.db.write_now(fn, **kw)

    # --- schedules ---------------------------------------------------------------------

    @initialize(crons=st.lists(st.sampled_from(sorted(CRONS)), min_size=1, max_size=3))
    def create(self, crons: list[str]) -> None:
        for cron in crons:
            made = self.write(create_schedule, tenant_id=self.tenant, spec=spec(cron), now=self.now)
            model = ModelSchedule(schedule_id=made.id, cron=cron)
            model.segments.append(Segment(cron=cron, start=self.now))
            self.schedules.append(model)

    @rule(data=st.data(), cron=st.sampled_from(sorted(CRONS)), body=st.sampled_from([b"{}", b"[]"]))
    def edit_timing(self, data: st.DataObject, cron: str, body: bytes) -> None:
        """An edit that re-plans. (Jitter would too, but its delay hashes the schedule's
        random id: Hypothesis needs runs that replay identically.)"""
        model = data.draw(st.sampled_from(self.schedules))
        current = self.db.read_now(
            get_schedule, tenant_id=self.tenant, schedule_id=model.schedule_id
        )
        assert current is not None
        new = dataclasses.replace(current.spec, cron=cron, body=body)
        if (new.cron, new.body) == (current.spec.cron, current.spec.body):
            return
        self.write(
            update_schedule,
            tenant_id=self.tenant,
            schedule_id=model.schedule_id,
            spec=new,
            now=self.now,
        )
        self.withdrawn(model)
        model.cron = cron
        if not model.paused:
            model.segments.append(Segment(cron=cron, start=self.now))
        FIGURES["edits"] += 1

    @rule(data=st.data(), policy=st.sampled_from(["all", "latest", "skip"]))
    def edit_policy(self, data: st.DataObject, policy: str) -> None:
        model = data.draw(st.sampled_from(self.schedules))
        current = self.db.read_now(
            get_schedule, tenant_id=self.tenant, schedule_id=model.schedule_id
        )
        assert current is not None
        new = dataclasses.replace(current.spec, catchup_policy=CatchupPolicy(policy))
        self.write(
            update_schedule,
            tenant_id=self.tenant,
            schedule_id=model.schedule_id,
            spec=new,
            now=self.now,
        )

    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        model = data.draw(st.sampled_from(self.schedules))
        self.write(
            pause_schedule, tenant_id=self.tenant, schedule_id=model.schedule_id, now=self.now
        )
        if not model.paused:
            self.withdrawn(model)
            model.paused = True
            FIGURES["pauses"] += 1

    def withdrawn(self, model: ModelSchedule) -> None:
        """An edit of a timing field or a pause at ``now`` withdrew the schedule's open,
        never-attempted rows after ``now`` — of every segment, since after a backwards
        clock step earlier segments may have been planned past ``now``."""
        self.withdrawable_after = self.now
        if not model.paused:  # the open segment was planned up to now before the change
            open_segment = model.segments[-1]
            open_segment.covered = max(open_segment.covered or self.now, self.now)
        for segment in model.segments:
            segment.end = self.now if segment.end is None else min(segment.end, self.now)

    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        model = data.draw(st.sampled_from(self.schedules))
        self.write(
            resume_schedule, tenant_id=self.tenant, schedule_id=model.schedule_id, now=self.now
        )
        if model.paused:
            model.paused = False
            model.segments.append(Segment(cron=model.cron, start=self.now))

    # --- time and the services ---------------------------------------------------------

    @rule(step=st.sampled_from(STEPS))
    def clock_step(self, step: int) -> None:
        self.now += step
        FIGURES["clock_steps_back" if step < 0 else "clock_steps_forward"] += 1

    @rule(
        step=st.sampled_from([s for s in STEPS if s > 0]),
        limit=st.integers(0, 4),
        outcomes=st.lists(st.sampled_from(["ok", "ok", "retry", "fail"]), max_size=4),
    )
    def tick(self, step: int, limit: int, outcomes: list[str]) -> None:
        """Time passes with the services keeping up: a plan, a claim, and completions of
        the oldest claims still held (zombies' included)."""
        self.clock_step(step)
        self.plan()
        self.invariants_hold()  # between transactions, as after any step
        self.claim(limit)
        for outcome in outcomes:
            if not self.held:
                break
            self.invariants_hold()
            self.finish(sorted(self.held, key=self.order)[0], outcome)

    @rule()
    def plan(self) -> None:
        for _ in range(100):
            result = self.write(plan_once, now=self.now, config=PlannerConfig())
            if not result.more:
                break
        else:
            raise AssertionError("the planner kept reporting more work")
        for model in self.schedules:
            segment = model.segments[-1]
            if not model.paused:
                segment.covered = max(segment.covered or self.now, self.now)

    @rule(limit=st.integers(min_value=0, max_value=4))
    def claim(self, limit: int) -> None:
        batch = self.write(
            claim_runs, owner=self.owner, now=self.now, lease_ms=LEASE_MS, limit=limit
        )
        self.held.extend(batch.runs)
        FIGURES["claims"] += len(batch.runs)

    @rule()
    def heartbeat(self) -> None:
        self.write(renew_leases, owner=self.owner, now=self.now, lease_ms=LEASE_MS)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), outcome=st.sampled_from(["ok", "retry", "fail"]))
    def complete(self, data: st.DataObject, outcome: str) -> None:
        self.finish(data.draw(st.sampled_from(sorted(self.held, key=self.order))), outcome)

    def finish(self, run: ClaimedRun, outcome: str) -> None:
        self.held.remove(run)
        before = self.rows.get(run.run_id)
        live = before is not None and before.state is RunState.RUNNING
        live = live and before is not None and before.lease_token == run.lease_token
        applied = self.write(
            complete_run, run=run, completion=completion(outcome, self.now), now=self.now
        )
        assert applied == live, "a completion was applied without its lease, or refused with it"
        FIGURES["completions" if applied else "stale_completions"] += 1

    @rule()
    def crash(self) -> None:
        """The process dies; a new one boots and takes back what the old one held. The
        old one's claims stay in ``held``: zombies whose completions must be fenced."""
        self.owner = self.write(register_incarnation, pid=2, now=self.now)
        self.write(reclaim_previous, incarnation_id=self.owner, now=self.now)
        FIGURES["crashes"] += 1

    @rule()
    def reap(self) -> None:
        self.write(reap_once, now=self.now, config=ReaperConfig())

    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        finished = [
            row
            for row in self.rows.values()
            if row.state
            in {RunState.SUCCEEDED, RunState.FAILED, RunState.MISSED, RunState.CANCELLED}
        ]
        if not finished:
            return
        row = data.draw(st.sampled_from(sorted(finished, key=self.order)))
        self.write(replay_run, tenant_id=self.tenant, run_id=row.run_id, now=self.now)
        FIGURES["replays"] += 1

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        rows = self.db.read_now(read_rows)
        self.check_occurrence_identity(rows)
        self.check_transitions(rows)
        self.check_coverage(rows)
        self.rows = rows
        self.withdrawable_after = None

    def check_occurrence_identity(self, rows: dict[str, Row]) -> None:
        seen: set[tuple[str, int]] = set()
        for row in rows.values():
            occurrence = (row.schedule_id, row.scheduled_for)
            assert occurrence not in seen, f"two rows for {occurrence}"
            seen.add(occurrence)
            identity = (row.run_id, row.key)
            assert self.identity.setdefault(occurrence, identity) == identity
            text = format_scheduled_for(row.scheduled_for)
            assert row.key == idempotency_key(row.schedule_id, text)

    def check_transitions(self, rows: dict[str, Row]) -> None:
        for rid, old in self.rows.items():
            new = rows.get(rid)
            if new is None:
                assert self.withdrawable_after is not None, f"{rid} vanished outside an edit"
                assert old.state in OPEN and old.attempt == 0
                assert old.scheduled_for > self.withdrawable_after
                FIGURES["withdrawn"] += 1
                continue
            assert new.attempt >= old.attempt
            if new.state is old.state:
                assert new.attempt == old.attempt, f"{rid}: attempts moved in place"
                continue
            move = (old.state, new.state)
            assert move in LEGAL or move in COMPOSED, f"{rid}: {old.state} -> {new.state}"
            entered_running = new.state is RunState.RUNNING
            assert new.attempt == old.attempt + (1 if entered_running else 0)
            FIGURES["transitions"] += 1
        for rid, new in rows.items():
            if rid not in self.rows:
                born = {RunState.PENDING, RunState.MISSED}
                if self.withdrawable_after is not None and new.scheduled_for <= self.now:
                    born.add(RunState.CANCELLED)  # due, settled by a pause, then withdrawn
                assert new.state in born, f"{rid} born {new.state}"

    def check_coverage(self, rows: dict[str, Row]) -> None:
        present = {(row.schedule_id, row.scheduled_for) for row in rows.values()}
        for model in self.schedules:
            for segment in model.segments:
                assert segment.dropped() == 0, f"{model.schedule_id}: an edit dropped occurrences"
                for occurrence in segment.must_have_rows():
                    assert (model.schedule_id, occurrence) in present, (
                        f"{model.schedule_id}: covered occurrence"
                        f" {format_scheduled_for(occurrence)} has no row"
                    )
        own, summaries = self.db.read_now(missed_announcements)
        for row in rows.values():
            if row.state is RunState.MISSED:
                announced = row.run_id in own or any(
                    sid == row.schedule_id and first <= row.scheduled_for <= last
                    for sid, first, last in summaries
                )
                assert announced, f"missed run {row.run_id} has no event"


def completion(outcome: str, now: int) -> Completion:
    transition, verdict, status = {
        "ok": (Transition.SUCCEED, AttemptOutcome.OK, 200),
        "retry": (Transition.RETRY, AttemptOutcome.RETRYABLE, 503),
        "fail": (Transition.FAIL, AttemptOutcome.PERMANENT, 400),
    }[outcome]
    return Completion(
        outcome=verdict,
        transition=transition,
        due_at=now + 5 * SECOND if transition is Transition.RETRY else None,
        failure_reason="exhausted" if transition is Transition.FAIL else None,
        http_status=status,
        error=None,
        latency_ms=3,
        response_excerpt=None,
    )


@pytest.mark.parametrize(
    "store",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.postgres_twin])],
)
def test_store_lifecycle_model(
    profile: Profile, store: str, request: pytest.FixtureRequest
) -> None:
    machine = StoreLifecycle
    if store == "postgresql":
        machine = _on_postgres(
            request.getfixturevalue("pg_cluster"), request.getfixturevalue("pg_store_template")
        )
    FIGURES.clear()
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=profile.pick(fast=100 if store == "sqlite" else 15, soak=3000),
            stateful_step_count=profile.pick(fast=30, soak=60),
            derandomize=not profile.soak,
            deadline=None,
            database=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )
    publish(f"model ({store})", **{name: FIGURES[name] for name in sorted(FIGURES)})


def _on_postgres(cluster: Cluster, template: str) -> type[StoreLifecycle]:
    """The same machine, each example on a fresh copy of the migrated PostgreSQL database."""

    def postgres_store() -> tuple[Store, Callable[[], None]]:
        name = cluster.next_database_name("model")
        db = PgDatabase.open(
            cluster.create_database(name, template=template), pool_size=2, threaded=False
        )
        return db, lambda: cluster.drop_database(name)

    return type(
        "StoreLifecycleOnPostgres", (StoreLifecycle,), {"new_store": staticmethod(postgres_store)}
    )


def test_resume_keeps_runs_the_tenant_asked_for_while_paused(tmp_path: Path) -> None:
    """Found by this model: resuming a schedule cancelled the runs its tenant had replayed
    or triggered while it was paused (``resume`` withdrew open runs like ``pause``)."""
    db = Database.open(tmp_path / "steeple.db", threaded=False)
    try:
        tenant = db.write_now(create_tenant, name="resume", now=T0).tenant_id
        sid = db.write_now(create_schedule, tenant_id=tenant, spec=spec("* * * * *"), now=T0).id
        db.write_now(plan_once, now=T0 + 61 * SECOND, config=PlannerConfig())
        db.write_now(pause_schedule, tenant_id=tenant, schedule_id=sid, now=T0 + 62 * SECOND)
        (cancelled,) = db.read_now(read_rows).values()
        assert cancelled.state is RunState.CANCELLED
        db.write_now(replay_run, tenant_id=tenant, run_id=cancelled.run_id, now=T0 + 63 * SECOND)
        triggered, _ = db.write_now(
            trigger_schedule, tenant_id=tenant, schedule_id=sid, now=T0 + 64 * SECOND
        )
        db.write_now(resume_schedule, tenant_id=tenant, schedule_id=sid, now=T0 + 65 * SECOND)
        states = {row.run_id: row.state for row in db.read_now(read_rows).values()}
        assert states == {cancelled.run_id: RunState.PENDING, triggered.id: RunState.PENDING}
    finally:
        db.close()
