"""Scenario 2 — lost acknowledgements (ADR 0034: delivery at-least-once, effect via the key).

The tenant's endpoint applies the effect (the recorder books the copy) and then the
acknowledgement is lost, one of two ways:

- ``drop`` — the connection closes without an answer;
- ``late`` — the answer comes after the attempt's deadline (``timeout_seconds`` 2 s), so
  the dispatcher cancels the request and records a ``deadline`` failure.

Steeple cannot tell either from a failed attempt, so it redelivers: every copy of one
occurrence must carry the same key, and a tenant that deduplicates on the key applies each
occurrence exactly once (effects after dedupe == occurrences), with nothing lost.

Two drivers: the engine in process under virtual time (thousands of copies, retry delays
of minutes cost nothing, seeded choice of which copies lose their answer), and the real
appliance process against a loopback endpoint that really drops the connection.
"""

from __future__ import annotations

import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.instants import parse_instant
from appliance.core.retry import TransportFailure
from appliance.engine.delivery import Answer, DeliveryFailed
from appliance.store.infra.database import Database
from appliance.store.pauses import pause_schedule
from appliance.store.tenants import create_tenant as store_create_tenant
from tests.chaos.conftest import Profile
from tests.chaos.recorder import (
    Occurrence,
    all_succeeded,
    classify,
    delivery_from_request,
    duplicate_rows,
    expected_occurrences,
    lease_violations,
    open_runs,
    outcome_counts,
    publish,
    query,
)
from tests.chaos.test_sigkill_loop import wait_until
from tests.e2e.harness import ANSWER, Action, Appliance, Delivery, Receiver, create_tenant
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0, ScheduleRow, insert_schedule

TIMEOUT_S = 2  # the schedules' per-attempt deadline
NO_ANSWER = "the server closed the connection without answering"  # as the real client says
MINUTE_MS = 60_000


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


class LosingEndpoint:
    """Books every copy, then loses the answer for a seeded share of them (at most
    ``max_losses`` per occurrence, so each one eventually gets through)."""

    def __init__(self, rng: random.Random, *, share: float, max_losses: int) -> None:
        self.rng = rng
        self.share = share
        self.max_losses = max_losses
        self.copies: list[Delivery] = []
        self.losses: dict[str, int] = {}
        self.lost = {"drop": 0, "late": 0}

    async def respond(self, request: Received, n: int) -> Answer:
        copy = delivery_from_request(request, arrived=trio.current_time())
        self.copies.append(copy)  # the effect is applied before the answer is lost
        if self.losses.get(copy.key, 0) >= self.max_losses or self.rng.random() >= self.share:
            return reply(200, b"ok")
        self.losses[copy.key] = self.losses.get(copy.key, 0) + 1
        way = self.rng.choice(("drop", "late"))
        self.lost[way] += 1
        if way == "drop":
            raise DeliveryFailed(
                TransportFailure.PROTOCOL, "the server closed the connection without answering"
            )
        await trio.sleep(TIMEOUT_S + 3)  # the deadline cancels this first
        return reply(200, b"too late")


async def test_lost_acks_in_process_every_effect_once_after_dedupe(
    autojump_clock: MockClock, inline_db: Database, profile: Profile
) -> None:
    minutes = profile.pick(15, 24 * 60)
    tenant = inline_db.write_now(store_create_tenant, name="acme", now=T0).tenant_id
    crons = ("*/10 * * * * *", "*/15 * * * * *", "* * * * *")
    sids = [
        inline_db.write_now(
            insert_schedule,
            tenant_id=tenant,
            row=ScheduleRow(cron=cron, timeout_seconds=TIMEOUT_S, next_fire_at=T0),
            now=T0,
        )
        for cron in crons
    ]
    losing = LosingEndpoint(profile.rng(), share=0.4, max_losses=3)
    wall = TrioWallClock(T0)
    until_ms = T0 + minutes * MINUTE_MS
    expected = [
        o
        for sid, cron in zip(sids, crons, strict=True)
        for o in expected_occurrences(sid, cron, after_ms=T0 - 1, until_ms=until_ms)
    ]
    async with running_engine(inline_db, wall, Endpoint(respond=losing.respond)):
        # Lost answers retry after 5 s, 5 min, 30 min, or at least 60 s after a deadline:
        # run on until every occurrence of the window has succeeded.
        while not _all_succeeded(inline_db.read_now(_states), expected):
            assert wall.now_ms() < until_ms + 6 * 60 * MINUTE_MS, "occurrences never succeeded"
            await trio.sleep(60)

    figures = classify(losing.copies, expected, until_ms=until_ms)
    outcomes = inline_db.read_now(_outcomes)
    publish(
        "lost_acks_in_process",
        seed=profile.seed,
        virtual_minutes=minutes,
        dropped=losing.lost["drop"],
        late=losing.lost["late"],
        **figures.as_dict(),
        retryable_attempts=outcomes.get("retryable", 0),
        dup_rows=inline_db.read_now(_duplicate_rows),
    )
    assert figures.lost == 0, figures.lost_list
    assert figures.dup_diff_key == 0, figures.bad_keys
    assert figures.unexpected == 0, figures.unexpected_list
    assert figures.effects == figures.occurrences  # exactly once after dedupe on the key
    assert figures.copies > figures.occurrences and figures.dup_same_key > 0
    assert inline_db.read_now(_duplicate_rows) == 0
    assert losing.lost["late"] > 0 and losing.lost["drop"] > 0
    # A late answer is a deadline failure of the attempt; a drop a protocol failure.
    assert inline_db.read_now(_failure_classes) >= {"deadline", "protocol"}


def _states(conn: apsw.Connection) -> dict[tuple[str, int], str]:
    rows = conn.execute("SELECT schedule_id, scheduled_for, state FROM job_runs")
    return {(sid, sched): state for sid, sched, state in rows}


def _all_succeeded(states: dict[tuple[str, int], str], expected: list[Occurrence]) -> bool:
    return all(states.get(o) == "succeeded" for o in expected)


def _outcomes(conn: apsw.Connection) -> dict[str, int]:
    rows = conn.execute("SELECT outcome, COUNT(*) FROM attempts GROUP BY outcome")
    return {str(outcome): n for outcome, n in rows}


def _duplicate_rows(conn: apsw.Connection) -> int:
    ((n,),) = conn.execute(
        "SELECT COUNT(*) - (SELECT COUNT(*) FROM (SELECT DISTINCT schedule_id, scheduled_for"
        " FROM job_runs)) FROM job_runs"
    )
    return int(n)


def _failure_classes(conn: apsw.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT DISTINCT json_extract(data, '$.reason') FROM events"
        " WHERE type = 'schedule.run.retrying'"
    )
    return {str(reason) for (reason,) in rows}


# --- the real process ----------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def first_copy_loses(
    way: Callable[[Delivery], str], seen: set[str]
) -> Callable[[Delivery], Action]:
    """The first copy of each occurrence loses its answer (``drop`` or ``late``)."""

    def respond(delivery: Delivery) -> Action:
        if delivery.key in seen:
            return ANSWER
        seen.add(delivery.key)
        if way(delivery) == "drop":
            return Action(drop=True)
        return Action(delay_s=TIMEOUT_S + 2)

    return respond


@pytest.mark.slow
@pytest.mark.parametrize(
    "ways",
    [
        pytest.param(("drop",), id="drop"),
        # A deadline failure waits at least 60 s before its retry: soak-length.
        pytest.param(("drop", "late"), id="drop-and-late", marks=pytest.mark.soak),
    ],
)
def test_lost_acks_real_process_redeliver_with_the_same_key(
    tmp_path: Path, profile: Profile, receiver: Receiver, ways: tuple[str, ...]
) -> None:
    rng = profile.rng()
    receiver.respond = first_copy_loses(lambda _d: rng.choice(ways), set())
    tenant = create_tenant(tmp_path)
    db_path = tmp_path / "steeple.db"
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            body = {
                "name": "acks",
                "cron": "* * * * * *",
                "target_url": receiver.url,
                "payload": {"n": 1},
                "timeout_seconds": TIMEOUT_S,
            }
            created = api.post("/v1/schedules", json=body)
            assert created.status_code == 201, created.text
            sid = created.json()["id"]
            window = profile.pick(5, 60)
            receiver.wait_for(lambda ds: len({d.key for d in ds}) >= window, 120)
            ((created_at,),) = query(db_path, "SELECT created_at FROM schedules")
            until_ms = max(parse_instant(d.scheduled_for) for d in receiver.snapshot())
            expected = expected_occurrences(
                sid, "* * * * * *", after_ms=int(str(created_at)), until_ms=until_ms
            )
            wait_until(
                lambda: all_succeeded(db_path, expected),
                "every occurrence of the window to succeed after its lost answer",
                timeout=180,
            )
            api.post(f"/v1/schedules/{sid}/pause").raise_for_status()
            wait_until(lambda: open_runs(db_path) == 0, "no open run")
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)

    figures = classify(receiver.snapshot(), expected, until_ms=until_ms)
    publish(
        "lost_acks_real_process",
        seed=profile.seed,
        ways="+".join(ways),
        **figures.as_dict(),
        attempts=sum(outcome_counts(db_path).values()),
        dup_rows=duplicate_rows(db_path),
    )
    assert figures.lost == 0, figures.lost_list
    assert figures.dup_diff_key == 0 and figures.unexpected == 0
    assert figures.effects == figures.occurrences
    assert figures.dup_same_key == figures.occurrences  # every first answer was lost
    assert duplicate_rows(db_path) == 0
    assert lease_violations(db_path) == []


async def test_an_answer_lost_while_the_schedule_is_paused_is_not_retried(
    autojump_clock: MockClock, inline_db: Database
) -> None:
    """Pausing while a delivery is in flight: the attempt finishes (ADR: "a delivery in
    flight finishes"), but if its answer is lost the run must not be retried behind the
    tenant's back: it ends ``cancelled`` like every other open run of the schedule."""
    tenant = inline_db.write_now(store_create_tenant, name="acme", now=T0).tenant_id
    row = ScheduleRow(cron="* * * * *", timeout_seconds=TIMEOUT_S, next_fire_at=T0)
    sid = inline_db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)
    wall = TrioWallClock(T0)
    copies: list[Delivery] = []

    async def pause_then_drop(request: Received, n: int) -> Answer:
        copies.append(delivery_from_request(request, arrived=trio.current_time()))
        inline_db.write_now(pause_schedule, tenant_id=tenant, schedule_id=sid, now=wall.now_ms())
        raise DeliveryFailed(
            TransportFailure.PROTOCOL, "the server closed the connection without answering"
        )

    async with running_engine(inline_db, wall, Endpoint(respond=pause_then_drop)):
        await trio.sleep(3600)  # an hour: any retry (5 s, then 5 min, ...) would have come
    states = inline_db.read_now(_states)
    assert len(copies) == 1
    assert list(states.values()) == ["cancelled"], states
