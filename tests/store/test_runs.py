"""Runs, claims, leases, fencing and reclaim against a real SQLite file."""

from __future__ import annotations

import apsw
import pytest

from appliance.core.events import EventType
from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import format_scheduled_for
from appliance.core.retry import RESTART_LIMIT, RetryPolicy
from appliance.core.runs import AttemptOutcome, RunState, Transition, Trigger, occurrence_run
from appliance.core.schedules import CatchupPolicy, PayloadKind, Schedule, ScheduleSpec
from appliance.errors import Conflict, NotFound
from appliance.store.claims import ClaimedRun, claim_runs, renew_leases
from appliance.store.completions import Completion, complete_run
from appliance.store.events import list_events
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.infra.migrate import current_version, migrate, migrations
from appliance.store.materialise import insert_runs, store_body
from appliance.store.runs import (
    RunRecord,
    get_run,
    list_attempts,
    list_runs,
    withdraw_future_runs,
    withdraw_open_runs,
)
from appliance.store.usecases.manual import replay_run, trigger_schedule
from appliance.store.usecases.reclaim import (
    LAPSED,
    earliest_lease_expiry,
    reclaim_expired,
    reclaim_previous,
)
from tests.store.conftest import SQLITE_ONLY, T0, MakeSchedule, ScheduleRow

LEASE = 30_000
MINUTE = 60_000


def schedule_value(schedule_id: str, tenant_id: str, row: ScheduleRow | None = None) -> Schedule:
    row = row or ScheduleRow()
    spec = ScheduleSpec(
        name="test",
        cron=row.cron,
        timezone=row.timezone,
        target_url=row.target_url,
        payload_kind=PayloadKind.JSON,
        body=row.body,
        content_type=row.content_type,
        headers=row.headers,
        jitter_seconds=row.jitter_seconds,
        catchup_policy=CatchupPolicy(row.catchup_policy),
        catchup_window_seconds=row.catchup_window_seconds,
        retry=RetryPolicy(max_attempts=row.max_attempts),
        timeout_seconds=row.timeout_seconds,
        paused=row.paused,
    )
    return Schedule(
        id=schedule_id,
        tenant_id=tenant_id,
        spec=spec,
        version=1,
        next_fire_at=row.next_fire_at,
        created_at=T0,
        updated_at=T0,
    )


def add_run(
    conn: apsw.Connection,
    *,
    schedule: Schedule,
    scheduled_for: int,
    due_at: int | None = None,
    state: RunState = RunState.PENDING,
) -> str:
    digest = store_body(conn, content_type=schedule.spec.content_type, body=schedule.spec.body)
    run = occurrence_run(
        schedule_id=schedule.id,
        tenant_id=schedule.tenant_id,
        schedule_version=schedule.version,
        scheduled_for=scheduled_for,
        due_at=scheduled_for if due_at is None else due_at,
        state=state,
        trigger=Trigger.SCHEDULE,
        body_digest=digest,
        missed_reason="catchup_skip" if state is RunState.MISSED else None,
    )
    assert insert_runs(conn, [run], now=T0) == {run.id}
    return run.id


@pytest.fixture
def schedule(make_schedule: MakeSchedule, tenant: str) -> Schedule:
    return schedule_value(make_schedule(), tenant)


def run_of(db: Database, schedule: Schedule, rid: str) -> RunRecord:
    run = db.read_now(get_run, tenant_id=schedule.tenant_id, run_id=rid)
    assert run is not None
    return run


def claim(db: Database, owner: str, now: int, limit: int = 10) -> tuple[ClaimedRun, ...]:
    return db.write_now(claim_runs, owner=owner, now=now, lease_ms=LEASE, limit=limit).runs


def ok() -> Completion:
    return Completion(
        outcome=AttemptOutcome.OK,
        transition=Transition.SUCCEED,
        due_at=None,
        failure_reason=None,
        http_status=200,
        error=None,
        latency_ms=12,
        response_excerpt="fine",
    )


def retry(due_at: int) -> Completion:
    return Completion(
        outcome=AttemptOutcome.RETRYABLE,
        transition=Transition.RETRY,
        due_at=due_at,
        failure_reason=None,
        http_status=503,
        error=None,
        latency_ms=4,
        response_excerpt=None,
    )


# --- materialisation and identity -------------------------------------------------------


def test_one_row_per_occurrence_and_derived_identity(db: Database, schedule: Schedule) -> None:
    first = db.write_now(add_run, schedule=schedule, scheduled_for=T0)

    def again(conn: apsw.Connection) -> bool:
        digest = store_body(conn, content_type="application/json", body=b'{"n":1}')
        run = occurrence_run(
            schedule_id=schedule.id,
            tenant_id=schedule.tenant_id,
            schedule_version=schedule.version,
            scheduled_for=T0,
            due_at=T0 + 5,
            state=RunState.PENDING,
            trigger=Trigger.SCHEDULE,
            body_digest=digest,
        )
        return bool(insert_runs(conn, [run], now=T0))

    assert db.write_now(again) is False
    run = run_of(db, schedule, first)
    text = format_scheduled_for(T0)
    assert run.id == run_id(schedule.id, text)
    assert run.idempotency_key == idempotency_key(schedule.id, text)
    assert run.due_at == T0  # the first row stands
    assert db.read_now(lambda c: c.execute("SELECT COUNT(*) FROM job_runs").fetchone()[0]) == 1


def test_trigger_within_one_second_is_one_run(db: Database, schedule: Schedule) -> None:
    ids = {"tenant_id": schedule.tenant_id, "schedule_id": schedule.id}
    run, created = db.write_now(trigger_schedule, **ids, now=T0 + 5_250)
    again, created_again = db.write_now(trigger_schedule, **ids, now=T0 + 5_900)
    later, created_later = db.write_now(trigger_schedule, **ids, now=T0 + 6_000)
    assert (created, created_again, created_later) == (True, False, True)
    assert again.id == run.id != later.id
    assert run.scheduled_for == T0 + 5_000 and run.trigger is Trigger.MANUAL
    assert run.state is RunState.PENDING and run.due_at == T0 + 5_250


# --- claim ------------------------------------------------------------------------------


def test_claim_takes_due_runs_earliest_first_with_own_tokens(
    db: Database, schedule: Schedule
) -> None:
    for minute in (2, 0, 1, 5):
        db.write_now(add_run, schedule=schedule, scheduled_for=T0 + minute * MINUTE)
    batch = db.write_now(claim_runs, owner="inc_a", now=T0 + 3 * MINUTE, lease_ms=LEASE, limit=2)
    assert [r.scheduled_for for r in batch.runs] == [T0, T0 + MINUTE]
    assert batch.next_due_at == T0 + 2 * MINUTE
    tokens = {r.lease_token for r in batch.runs}
    assert len(tokens) == 2 and all(len(t) == 32 for t in tokens)
    first = batch.runs[0]
    assert first.attempt == 1 and first.body == b'{"n":1}'
    assert first.headers == (("X-Team", "billing"),) and first.secrets
    assert first.lease_expires_at == T0 + 3 * MINUTE + LEASE
    attempts = db.read_now(list_attempts, run_id=first.run_id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, None)]


def test_two_claimers_never_hold_the_same_run(db: Database, schedule: Schedule) -> None:
    for second in range(20):
        db.write_now(add_run, schedule=schedule, scheduled_for=T0 + second * 1000)
    now = T0 + MINUTE
    a = claim(db, "inc_a", now, limit=7)
    b = claim(db, "inc_b", now, limit=50)
    c = claim(db, "inc_c", now, limit=50)
    ids_a, ids_b = {r.run_id for r in a}, {r.run_id for r in b}
    assert len(ids_a) == 7 and len(ids_b) == 13 and c == ()
    assert not ids_a & ids_b


# --- heartbeat, completion, fencing -----------------------------------------------------


def test_renewal_extends_only_the_owners_unexpired_leases(db: Database, schedule: Schedule) -> None:
    for second in range(3):
        db.write_now(add_run, schedule=schedule, scheduled_for=T0 + second * 1000)
    mine = claim(db, "inc_a", T0 + 5_000, limit=2)
    claim(db, "inc_b", T0 + 5_000, limit=1)
    renewed = db.write_now(renew_leases, owner="inc_a", now=T0 + 15_000, lease_ms=LEASE)
    assert renewed == {run.lease_token for run in mine}
    assert db.read_now(earliest_lease_expiry) == T0 + 5_000 + LEASE  # inc_b's
    # Past expiry a lease belongs to the reaper: no silent revival.
    assert not db.write_now(renew_leases, owner="inc_b", now=T0 + 5_001 + LEASE, lease_ms=LEASE)
    expires = db.read_now(
        lambda c: c.execute(
            "SELECT lease_expires_at FROM job_runs WHERE id = ?", (mine[0].run_id,)
        ).fetchone()[0]
    )
    assert expires == T0 + 15_000 + LEASE


def test_completion_records_outcome_and_event(db: Database, schedule: Schedule) -> None:
    rid = db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    (held,) = claim(db, "inc_a", T0 + 1_000)
    assert db.write_now(complete_run, run=held, completion=ok(), now=T0 + 2_000) is True
    run = run_of(db, schedule, rid)
    assert run.state is RunState.SUCCEEDED and run.finished_at == T0 + 2_000
    assert run.last_status == 200 and run.attempt == 1
    (attempt,) = db.read_now(list_attempts, run_id=rid)
    assert attempt.outcome is AttemptOutcome.OK and attempt.response_excerpt == "fine"
    (event,) = db.read_now(list_events, tenant_id=schedule.tenant_id)
    assert event.type is EventType.RUN_SUCCEEDED and event.run_id == rid
    assert event.data["scheduled_for"] == format_scheduled_for(T0)
    assert event.data["idempotency_key"] == run.idempotency_key
    assert event.data["attempt"] == 1 and event.data["status"] == 200


def test_stale_completion_after_reclaim_changes_nothing(db: Database, schedule: Schedule) -> None:
    rid = db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    (old,) = claim(db, "inc_a", T0)
    reaped = db.write_now(reclaim_expired, now=T0 + LEASE + 1, ceiling_ms=600_000, limit=10)
    assert reaped == 1
    (new,) = claim(db, "inc_b", T0 + LEASE + 2)
    assert new.attempt == 2 and new.lease_token != old.lease_token

    assert db.write_now(complete_run, run=old, completion=ok(), now=T0 + LEASE + 3) is False
    run = run_of(db, schedule, rid)
    assert run.state is RunState.RUNNING and run.last_status is None
    outcomes = [(a.attempt, a.outcome) for a in db.read_now(list_attempts, run_id=rid)]
    assert outcomes == [(1, AttemptOutcome.STALE), (2, None)]
    types = [e.type for e in db.read_now(list_events, tenant_id=schedule.tenant_id)]
    assert types == [EventType.RUN_RETRYING]  # the reclaim's; nothing from the stale write
    # Both facts stay on the attempt row: the reclaim's instant and error, and the answer
    # that came after it (its own instant, status and excerpt).
    stale, second = db.read_now(list_attempts, run_id=rid)
    assert (stale.reclaimed_at, stale.error) == (T0 + LEASE + 1, LAPSED)
    assert (stale.finished_at, stale.http_status, stale.response_excerpt) == (
        T0 + LEASE + 3,
        200,
        "fine",
    )
    assert second.reclaimed_at is None

    assert db.write_now(complete_run, run=new, completion=ok(), now=T0 + LEASE + 4) is True
    assert run_of(db, schedule, rid).state is RunState.SUCCEEDED


def test_a_reclaim_records_when_it_took_the_attempt_back(db: Database, schedule: Schedule) -> None:
    rid = db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    claim(db, "inc_a", T0)
    db.write_now(reclaim_expired, now=T0 + LEASE + 1, ceiling_ms=600_000, limit=10)
    (attempt,) = db.read_now(list_attempts, run_id=rid)
    assert attempt.outcome is AttemptOutcome.ABANDONED
    assert attempt.reclaimed_at == attempt.finished_at == T0 + LEASE + 1


@SQLITE_ONLY  # the SQLite file's migration (PostgreSQL's: tests/store/test_pg_schema_data.py)
def test_the_migration_recovers_the_reclaim_instant_of_older_attempts(
    db: Database, schedule: Schedule
) -> None:
    """A file written before ``attempts.reclaimed_at`` gets it back: an abandoned
    attempt's from its finish, a stale one's from its reclaim's run event."""
    abandoned = db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    stale = db.write_now(add_run, schedule=schedule, scheduled_for=T0 + MINUTE)
    old = {run.run_id: run for run in claim(db, "inc_a", T0 + MINUTE)}
    db.write_now(reclaim_expired, now=T0 + MINUTE + LEASE + 1, ceiling_ms=600_000, limit=10)
    db.write_now(complete_run, run=old[stale], completion=ok(), now=T0 + MINUTE + LEASE + 5)
    db.close()
    conn = apsw.Connection(str(db.sqlite_file))
    version = current_version(conn)
    number = next(n for n, sql in migrations() if "reclaimed_at INTEGER" in sql)
    conn.execute(
        "ALTER TABLE attempts DROP COLUMN reclaimed_at; DROP TABLE leader;"  # 0020's
        " CREATE INDEX job_runs_tenant_time ON job_runs(tenant_id, scheduled_for, id);"  # 0021's
        " DROP TABLE invitations;"  # 0022's
        " DROP INDEX schedules_tenant_key; ALTER TABLE schedules DROP COLUMN key;"  # 0023's
        " ALTER TABLE schedules DROP COLUMN method;"
        " CREATE INDEX job_runs_lease_owner ON job_runs(lease_owner)"  # 0024's
        " WHERE state = 'running'; CREATE INDEX job_runs_finished"
        " ON job_runs(COALESCE(finished_at, updated_at))"
        " WHERE state IN ('cancelled', 'failed', 'missed', 'succeeded');"
        f" PRAGMA user_version = {number - 1}"
    )
    assert migrate(conn) == version
    found = dict(conn.execute("SELECT run_id, reclaimed_at FROM attempts").fetchall())
    assert found == {abandoned: T0 + MINUTE + LEASE + 1, stale: T0 + MINUTE + LEASE + 1}
    conn.close()


def test_gone_pauses_the_schedule_and_withdraws_open_runs(db: Database, schedule: Schedule) -> None:
    rid = db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    later = db.write_now(add_run, schedule=schedule, scheduled_for=T0 + MINUTE)
    (held,) = claim(db, "inc_a", T0 + 1_000, limit=1)
    gone = Completion(
        outcome=AttemptOutcome.PERMANENT,
        transition=Transition.FAIL,
        due_at=None,
        failure_reason="gone",
        http_status=410,
        error=None,
        latency_ms=3,
        response_excerpt=None,
        pause_schedule=True,
    )
    assert db.write_now(complete_run, run=held, completion=gone, now=T0 + 2_000)
    run = run_of(db, schedule, rid)
    assert run.state is RunState.FAILED and run.failure_reason == "gone"
    paused, version = db.read_now(
        lambda c: c.execute(
            "SELECT paused, version FROM schedules WHERE id = ?", (schedule.id,)
        ).fetchone()
    )
    assert (paused, version) == (1, 2)
    assert db.read_now(get_run, tenant_id=schedule.tenant_id, run_id=later) is None  # freed
    types = [e.type for e in db.read_now(list_events, tenant_id=schedule.tenant_id)]
    assert types == [EventType.RUN_FAILED, EventType.SCHEDULE_PAUSED_BY_RECEIVER]


# --- reclaim ----------------------------------------------------------------------------


def test_boot_reclaim_returns_earlier_incarnations_runs_due_now(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    one = schedule_value(make_schedule(max_attempts=1), tenant)
    eight = schedule_value(make_schedule(), tenant)
    old = db.write_now(register_incarnation, pid=1, now=T0)
    last_try = db.write_now(add_run, schedule=one, scheduled_for=T0)
    retried = db.write_now(add_run, schedule=eight, scheduled_for=T0)
    claim(db, old, T0 + 1_000)
    new = db.write_now(register_incarnation, pid=2, now=T0 + 5_000)
    db.write_now(add_run, schedule=eight, scheduled_for=T0 + 1_000)
    (mine,) = claim(db, new, T0 + 5_000)

    assert db.write_now(reclaim_previous, incarnation_id=new, now=T0 + 6_000) == 2
    for sched, rid in ((eight, retried), (one, last_try)):
        # Not charged to the budget: even a run allowed one attempt goes back, due now.
        back = run_of(db, sched, rid)
        assert back.state is RunState.RETRY_WAIT and back.due_at == T0 + 6_000
    for rid in (retried, last_try):
        (attempt,) = db.read_now(list_attempts, run_id=rid)
        assert attempt.outcome is AttemptOutcome.ABANDONED and attempt.finished_at == T0 + 6_000
    assert run_of(db, eight, mine.run_id).state is RunState.RUNNING  # our own: untouched
    ended = db.read_now(
        lambda c: dict(c.execute("SELECT id, ended_at FROM incarnations").fetchall())
    )
    assert ended == {old: T0 + 6_000, new: None}
    next_claim = db.write_now(claim_runs, owner=new, now=T0, lease_ms=LEASE, limit=0)
    assert next_claim.next_due_at == T0 + 6_000


def test_a_boot_reclaim_is_not_charged_to_the_budget_but_a_reaped_lease_is(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    """max_attempts=2: a restart, then two real attempts; the third real one is never made.
    Attempt numbers keep counting (1 abandoned, 2 and 3 answered) and the key is one."""
    two = schedule_value(make_schedule(max_attempts=2), tenant)
    rid = db.write_now(add_run, schedule=two, scheduled_for=T0)
    (first,) = claim(db, "inc_a", T0)
    new = db.write_now(register_incarnation, pid=2, now=T0 + 1_000)
    db.write_now(reclaim_previous, incarnation_id=new, now=T0 + 1_000)
    (second,) = claim(db, new, T0 + 1_000)
    assert db.write_now(complete_run, run=second, completion=retry(T0 + 2_000), now=T0 + 1_500)
    (third,) = claim(db, new, T0 + 2_000)
    assert (first.attempt, second.attempt, third.attempt) == (1, 2, 3)
    assert first.idempotency_key == second.idempotency_key == third.idempotency_key
    # The reaper's reclaim of attempt 3 is charged: 2 of 2 used, the run fails.
    assert db.write_now(reclaim_expired, now=T0 + 2_000 + LEASE + 1, ceiling_ms=MINUTE, limit=5)
    failed = run_of(db, two, rid)
    assert failed.state is RunState.FAILED and failed.failure_reason == "exhausted"
    outcomes = [a.outcome for a in db.read_now(list_attempts, run_id=rid)]
    assert outcomes == [
        AttemptOutcome.ABANDONED,
        AttemptOutcome.RETRYABLE,
        AttemptOutcome.ABANDONED,
    ]


def test_restarts_in_a_row_are_bounded_so_a_poison_run_cannot_crash_loop_forever(
    db: Database, schedule: Schedule
) -> None:
    """Each restart abandons the same run mid-attempt (it may be what kills the process):
    RESTART_LIMIT - 1 restarts leave it due; the RESTART_LIMIT-th fails it, with its event.
    An answered attempt in between starts the count again."""
    rid = db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    owner, now = "inc_0", T0

    def restart() -> RunRecord:
        nonlocal owner, now
        now += 1_000
        owner = db.write_now(register_incarnation, pid=2, now=now)
        db.write_now(reclaim_previous, incarnation_id=owner, now=now)
        return run_of(db, schedule, rid)

    (run,) = claim(db, owner, now)
    assert db.write_now(complete_run, run=run, completion=retry(now), now=now)
    for _ in range(RESTART_LIMIT - 1):
        assert len(claim(db, owner, now)) == 1
        assert restart().state is RunState.RETRY_WAIT
    claim(db, owner, now)
    failed = restart()
    assert failed.state is RunState.FAILED and failed.failure_reason == "exhausted"
    attempts = db.read_now(list_attempts, run_id=rid)
    assert len(attempts) == RESTART_LIMIT + 1  # one answered, then the abandoned ones
    events = [e.type for e in db.read_now(list_events, tenant_id=schedule.tenant_id)]
    assert events[-1] is EventType.RUN_FAILED


def test_a_run_reclaimed_after_its_schedule_was_paused_is_cancelled(
    db: Database, make_schedule: MakeSchedule, tenant: str
) -> None:
    """The executor died mid-attempt and the tenant paused the schedule meanwhile: the
    reclaim must not queue a retry behind the tenant's back (as complete_run does not)."""
    paused = schedule_value(make_schedule(), tenant)
    old = db.write_now(register_incarnation, pid=1, now=T0)
    rid = db.write_now(add_run, schedule=paused, scheduled_for=T0)
    claim(db, old, T0 + 1_000)
    db.write_now(
        lambda c: c.execute(
            "UPDATE schedules SET paused = 1, updated_at = ? WHERE id = ?", (T0 + 2_000, paused.id)
        )
    )
    new = db.write_now(register_incarnation, pid=2, now=T0 + 5_000)
    assert db.write_now(reclaim_previous, incarnation_id=new, now=T0 + 6_000) == 1
    assert run_of(db, paused, rid).state is RunState.CANCELLED
    (attempt,) = db.read_now(list_attempts, run_id=rid)
    assert attempt.outcome is AttemptOutcome.ABANDONED


def test_reaper_ceiling_reclaims_orphans_despite_heartbeats(
    db: Database, schedule: Schedule
) -> None:
    rid = db.write_now(add_run, schedule=schedule, scheduled_for=T0)
    claim(db, "inc_a", T0)
    now = T0
    for _ in range(70):  # ten minutes of heartbeats for a row nobody works on
        now += 10_000
        db.write_now(renew_leases, owner="inc_a", now=now, lease_ms=LEASE)
        db.write_now(reclaim_expired, now=now, ceiling_ms=600_000, limit=10)
    assert run_of(db, schedule, rid).state is RunState.RETRY_WAIT
    assert now - T0 > 600_000


# --- API-facing queries -----------------------------------------------------------------


def test_replay_reopens_a_finished_run_with_the_same_key(db: Database, schedule: Schedule) -> None:
    rid = db.write_now(add_run, schedule=schedule, scheduled_for=T0, state=RunState.MISSED)
    with pytest.raises(NotFound):
        db.write_now(replay_run, tenant_id="ten_other", run_id=rid, now=T0)
    replayed = db.write_now(replay_run, tenant_id=schedule.tenant_id, run_id=rid, now=T0 + 9)
    assert replayed.state is RunState.PENDING and replayed.due_at == T0 + 9
    assert replayed.idempotency_key == idempotency_key(schedule.id, format_scheduled_for(T0))
    assert replayed.finished_at is None
    with pytest.raises(Conflict):
        db.write_now(replay_run, tenant_id=schedule.tenant_id, run_id=rid, now=T0 + 10)


def test_withdraw_deletes_future_rows_and_cancels_due_ones(
    db: Database, schedule: Schedule
) -> None:
    now = T0 + 10 * MINUTE
    jittered = db.write_now(add_run, schedule=schedule, scheduled_for=T0, due_at=now + 1)
    retrying = db.write_now(add_run, schedule=schedule, scheduled_for=T0 + MINUTE)
    running = db.write_now(add_run, schedule=schedule, scheduled_for=T0 + 2 * MINUTE)
    future = db.write_now(add_run, schedule=schedule, scheduled_for=now + 1_000)
    done = db.write_now(
        add_run, schedule=schedule, scheduled_for=T0 + 3 * MINUTE, state=RunState.MISSED
    )
    first, _ = claim(db, "inc_a", now - 1_000, limit=2)
    assert first.run_id == retrying
    db.write_now(complete_run, run=first, completion=retry(now + MINUTE), now=now - 500)

    touched = db.write_now(withdraw_open_runs, schedule_id=schedule.id, now=now)
    assert touched == 3
    state = {
        rid: None if run is None else run.state
        for rid in (jittered, retrying, running, future, done)
        for run in [db.read_now(get_run, tenant_id=schedule.tenant_id, run_id=rid)]
    }
    assert state == {
        jittered: RunState.CANCELLED,
        retrying: RunState.CANCELLED,
        running: RunState.RUNNING,  # its attempt finishes; the outcome is still recorded
        future: None,  # deleted: the slot is free for a later plan
        done: RunState.MISSED,
    }


def test_an_edit_withdraws_only_future_rows(db: Database, schedule: Schedule) -> None:
    now = T0 + 10 * MINUTE
    jittered = db.write_now(add_run, schedule=schedule, scheduled_for=T0, due_at=now + 1)
    retrying = db.write_now(add_run, schedule=schedule, scheduled_for=T0 + MINUTE)
    future = db.write_now(add_run, schedule=schedule, scheduled_for=now + 1_000)
    (first,) = claim(db, "inc_a", now - 1_000, limit=1)
    assert first.run_id == retrying
    db.write_now(complete_run, run=first, completion=retry(now + MINUTE), now=now - 500)

    assert db.write_now(withdraw_future_runs, schedule_id=schedule.id, now=now) == 1
    state = {
        rid: None if run is None else run.state
        for rid in (jittered, retrying, future)
        for run in [db.read_now(get_run, tenant_id=schedule.tenant_id, run_id=rid)]
    }
    assert state == {
        jittered: RunState.PENDING,  # already due under the old spec: still delivered
        retrying: RunState.RETRY_WAIT,  # its retries go on, to the edited target
        future: None,  # the new spec plans this slot
    }


def test_list_runs_newest_first_with_keyset_pages(db: Database, schedule: Schedule) -> None:
    for minute in range(5):
        db.write_now(add_run, schedule=schedule, scheduled_for=T0 + minute * MINUTE)
    page = db.read_now(list_runs, tenant_id=schedule.tenant_id, schedule_id=schedule.id, limit=2)
    assert [r.scheduled_for for r in page] == [T0 + 4 * MINUTE, T0 + 3 * MINUTE]
    rest = db.read_now(
        list_runs,
        tenant_id=schedule.tenant_id,
        schedule_id=schedule.id,
        limit=10,
        before_scheduled_for=page[-1].scheduled_for,
    )
    assert [r.scheduled_for for r in rest] == [T0 + 2 * MINUTE, T0 + MINUTE, T0]
    assert db.read_now(list_runs, tenant_id="ten_x", schedule_id=schedule.id, limit=9) == []
