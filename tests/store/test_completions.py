"""Completions in batches, on both stores: those that finish together are written by one
call in one transaction (SQLite's group commit; PostgreSQL's batch,
``store/infra/postgres/batches.py``), each as it would be alone — fenced on its lease
token, a 410 Gone pausing its schedule — and one that cannot be written fails alone."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

import apsw
import pytest
import trio
import trio.testing

from appliance.core.events import EventType
from appliance.core.instants import format_scheduled_for
from appliance.core.runs import AttemptOutcome, IllegalTransition, RunState, Transition
from appliance.core.schedules import Schedule
from appliance.store.claims import ClaimedRun
from appliance.store.completions import Completion, Finished, complete_runs
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.runs import list_attempts
from tests.store.conftest import T0, MakeSchedule
from tests.store.test_runs import MINUTE, add_run, claim, ok, retry, run_of, schedule_value

DONE_AT = T0 + 2_000


Batch = Callable[[apsw.Connection, Sequence[Finished]], list[bool]]


@pytest.fixture
def schedule(make_schedule: MakeSchedule, tenant: str) -> Schedule:
    return schedule_value(make_schedule(), tenant)


@pytest.fixture
def held(db: Database, schedule: Schedule) -> list[ClaimedRun]:
    """Twelve claimed runs of one schedule, one a minute."""
    for k in range(12):
        db.write_now(add_run, schedule=schedule, scheduled_for=T0 - k * MINUTE)
    runs = claim(db, "inc_a", T0 + 1_000, limit=12)
    assert len(runs) == 12
    return list(runs)


HOLD = object()  # the item of the write that holds the batch function's queue


async def write_together(
    db: Database, done: Sequence[Finished], fn: Batch = complete_runs
) -> list[bool | Exception]:
    """Write each of ``done`` with ``write_batched`` from its own task, queued in order
    behind a batch of the same function that holds its queue until every one of them
    waits (on SQLite, the writer itself)."""
    release = threading.Event()
    results: list[bool | Exception] = [False] * len(done)

    def held(conn: apsw.Connection, items: Sequence[Finished]) -> list[bool]:
        if items[0] is HOLD:
            release.wait(10)
            return [True]
        return fn(conn, items)

    async def one(k: int) -> None:
        try:
            results[k] = await db.write_batched(held, done[k])
        except Exception as exc:
            results[k] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(db.write_batched, held, HOLD)
        await trio.testing.wait_all_tasks_blocked()
        for k in range(len(done)):  # queued in this order
            nursery.start_soon(one, k)
            await trio.testing.wait_all_tasks_blocked()
        release.set()
    return results


async def test_completions_that_finish_together_are_one_call_in_one_commit(
    db: Database, schedule: Schedule, held: list[ClaimedRun]
) -> None:
    sizes: list[int] = []

    def counted(conn: apsw.Connection, done: Sequence[Finished]) -> list[bool]:
        sizes.append(len(done))
        return complete_runs(conn, done)

    commits = db.group_commits
    done = [Finished(run, ok() if k % 2 else retry(T0 + MINUTE), DONE_AT) for k, run in
            enumerate(held)]  # fmt: skip
    results = await write_together(db, done, counted)
    assert results == [True] * 12
    assert sizes == [12]  # one call for the twelve
    assert db.group_commits == commits + 2  # the holding write's, then the twelve's
    states = [run_of(db, schedule, run.run_id).state for run in held]
    assert states == [RunState.RETRY_WAIT, RunState.SUCCEEDED] * 6
    events = db.read_now(list_events, tenant_id=schedule.tenant_id)
    assert [(e.type, e.run_id, e.schedule_id, e.occurred_at, e.actor) for e in events] == [
        (
            EventType.RUN_RETRYING if k % 2 == 0 else EventType.RUN_SUCCEEDED,
            run.run_id,
            schedule.id,
            DONE_AT,
            None,
        )
        for k, run in enumerate(held)
    ]
    assert [e.data["scheduled_for"] for e in events] == [
        format_scheduled_for(run.scheduled_for) for run in held
    ]


async def test_a_completion_that_cannot_be_written_fails_alone(
    db: Database, schedule: Schedule, held: list[ClaimedRun]
) -> None:
    broken = replace(ok(), transition=Transition.CLAIM)  # not a way out of running: a bug
    done = [Finished(run, broken if k == 5 else ok(), DONE_AT) for k, run in enumerate(held)]
    results = await write_together(db, done)
    assert [type(r) for r in results] == [bool] * 5 + [IllegalTransition] + [bool] * 6, results
    assert all(r is True for k, r in enumerate(results) if k != 5)
    states = [run_of(db, schedule, run.run_id).state for run in held]
    assert states == [RunState.SUCCEEDED] * 5 + [RunState.RUNNING] + [RunState.SUCCEEDED] * 6
    (attempt,) = db.read_now(list_attempts, run_id=held[5].run_id)
    assert attempt.outcome is None  # nothing of the broken one was written


async def test_fencing_holds_in_a_batch(
    db: Database, schedule: Schedule, held: list[ClaimedRun]
) -> None:
    """A completion whose lease token is no longer the run's is recorded stale and changes
    nothing else, whatever is written beside it."""
    lost = replace(held[3], lease_token="0" * 32)
    done = [Finished(lost if k == 3 else run, ok(), DONE_AT) for k, run in enumerate(held)]
    results = await write_together(db, done)
    assert results == [True] * 3 + [False] + [True] * 8
    assert run_of(db, schedule, held[3].run_id).state is RunState.RUNNING
    events = db.read_now(list_events, tenant_id=schedule.tenant_id)
    assert held[3].run_id not in {e.run_id for e in events} and len(events) == 11
    # the stale answer is kept on its attempt row only when the token matches that row;
    # a token that never held this run changes no attempt either
    (attempt,) = db.read_now(list_attempts, run_id=held[3].run_id)
    assert attempt.outcome is None


async def test_a_stale_attempt_beside_its_runs_successor_is_told_apart(
    db: Database, schedule: Schedule, held: list[ClaimedRun]
) -> None:
    """The same run twice in a batch (an old attempt's late answer and the live one): the
    fence tells them apart by attempt, not by run id alone."""
    ghost = replace(held[0], attempt=held[0].attempt + 1, lease_token="f" * 32)
    results = await write_together(db, [Finished(ghost, ok(), DONE_AT),
                                        Finished(held[0], ok(), DONE_AT)])  # fmt: skip
    assert results == [False, True]


async def test_a_gone_among_a_batch_pauses_as_if_written_alone(
    db: Database, schedule: Schedule, held: list[ClaimedRun]
) -> None:
    """410 Gone pauses the schedule; a retry of the same schedule written after it in the
    same batch is then withdrawn (cancelled, no retrying event), as one after the other."""
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
    done = [Finished(held[0], gone, DONE_AT), Finished(held[1], retry(T0 + MINUTE), DONE_AT)]
    assert await write_together(db, done) == [True, True]
    assert run_of(db, schedule, held[0].run_id).state is RunState.FAILED
    assert run_of(db, schedule, held[1].run_id).state is RunState.CANCELLED
    types = [e.type for e in db.read_now(list_events, tenant_id=schedule.tenant_id)]
    assert types == [EventType.RUN_FAILED, EventType.SCHEDULE_PAUSED_BY_RECEIVER]
