"""Runs through the API: manual triggers, a schedule's runs (paged), one run with its
attempts, and replay keeping the run's identity."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from appliance.core.events import EventType
from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import format_scheduled_for
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.api.conftest import (
    START,
    Api,
    FakeClock,
    Nudges,
    deliver_due,
    load_schedule,
    plan_runs,
)

HOUR = 3_600_000


async def test_trigger_creates_a_manual_run_due_now(api: Api, nudges: Nudges) -> None:
    created = await api.create()
    reply = await api.call("POST", f"/v1/schedules/{created['id']}/trigger")
    assert reply.status == 201
    run = reply.body
    second = START - START % 1000  # the trigger instant, floored to the second
    text = format_scheduled_for(second)
    assert run["scheduled_for"] == text == "2026-03-02T10:00:00Z"
    assert run["due_at"] == "2026-03-02T10:00:00.400Z"
    assert run["id"] == run_id(created["id"], text)
    assert run["idempotency_key"] == idempotency_key(created["id"], text)
    assert (run["state"], run["trigger"], run["attempt"]) == ("pending", "manual", 0)
    assert run["schedule_id"] == created["id"]
    assert run["finished_at"] is None
    assert reply.headers["Location"] == f"/v1/runs/{run['id']}"
    assert nudges.count == 2


async def test_trigger_twice_within_one_second_is_one_run(
    api: Api, clock: FakeClock, nudges: Nudges
) -> None:
    created = await api.create()
    first = await api.call("POST", f"/v1/schedules/{created['id']}/trigger")
    clock.advance(500)  # 10:00:00.900, same second
    second = await api.call("POST", f"/v1/schedules/{created['id']}/trigger")
    assert (first.status, second.status) == (201, 200)
    assert second.body["id"] == first.body["id"]
    clock.advance(100)  # 10:00:01.000, the next second
    third = await api.call("POST", f"/v1/schedules/{created['id']}/trigger")
    assert third.status == 201
    assert third.body["id"] != first.body["id"]
    runs = await api.call("GET", f"/v1/schedules/{created['id']}/runs")
    assert [r["id"] for r in runs.body["items"]] == [third.body["id"], first.body["id"]]
    assert nudges.count == 3  # create + two new runs


async def test_runs_are_listed_newest_first_and_paged(api: Api, db: Any) -> None:
    created = await api.create()
    schedule = load_schedule(db, api.tenant_id, created["id"])
    slots = plan_runs(db, schedule, after=START, count=5)
    seen: list[str] = []
    cursor = None
    while True:
        query = {"limit": "2"} | ({"cursor": cursor} if cursor else {})
        reply = await api.call("GET", f"/v1/schedules/{created['id']}/runs", query=query)
        assert reply.status == 200
        seen.extend(item["scheduled_for"] for item in reply.body["items"])
        cursor = reply.body["next_cursor"]
        if cursor is None:
            break
    assert seen == [format_scheduled_for(ms) for ms in reversed(slots)]


async def test_a_run_shows_its_attempts(api: Api, db: Any, clock: FakeClock) -> None:
    created = await api.create()
    triggered = await api.call("POST", f"/v1/schedules/{created['id']}/trigger")
    assert deliver_due(db, now=clock.now) == [triggered.body["id"]]
    reply = await api.call("GET", f"/v1/runs/{triggered.body['id']}")
    assert reply.status == 200
    run = reply.body
    assert (run["state"], run["attempt"], run["last_status"]) == ("succeeded", 1, 200)
    assert run["finished_at"] == "2026-03-02T10:00:00.412Z"
    assert run["attempts"] == [
        {
            "attempt": 1,
            "started_at": "2026-03-02T10:00:00.400Z",
            "finished_at": "2026-03-02T10:00:00.412Z",
            "outcome": "ok",
            "http_status": 200,
            "error": None,
            "latency_ms": 12,
            "response_excerpt": "ok",
            "reclaimed_at": None,
        }
    ]


async def test_replay_keeps_the_id_and_key_and_adds_attempts(
    api: Api, db: Any, clock: FakeClock, nudges: Nudges
) -> None:
    created = await api.create()
    triggered = (await api.call("POST", f"/v1/schedules/{created['id']}/trigger")).body
    deliver_due(db, now=clock.now, status=410)
    clock.advance(60_000)
    reply = await api.call("POST", f"/v1/runs/{triggered['id']}/replay")
    assert reply.status == 200
    replayed = reply.body
    assert replayed["id"] == triggered["id"]
    assert replayed["idempotency_key"] == triggered["idempotency_key"]
    assert replayed["scheduled_for"] == triggered["scheduled_for"]
    assert (replayed["state"], replayed["failure_reason"]) == ("pending", None)
    assert replayed["due_at"] == "2026-03-02T10:01:00.400Z"
    assert nudges.count == 3
    deliver_due(db, now=clock.now)
    after = (await api.call("GET", f"/v1/runs/{triggered['id']}")).body
    assert after["state"] == "succeeded"
    assert [(a["attempt"], a["http_status"]) for a in after["attempts"]] == [(1, 410), (2, 200)]


async def test_replay_of_an_open_run_is_409(api: Api) -> None:
    created = await api.create()
    triggered = (await api.call("POST", f"/v1/schedules/{created['id']}/trigger")).body
    reply = await api.call("POST", f"/v1/runs/{triggered['id']}/replay")
    assert reply.status == 409
    assert reply.body["type"] == "urn:steeple:problem:conflict"


async def test_unknown_runs_and_schedules_are_404(api: Api) -> None:
    for method, path in [
        ("GET", "/v1/runs/run_00000000000000000000000000"),
        ("POST", "/v1/runs/run_00000000000000000000000000/replay"),
        ("GET", "/v1/schedules/sch_00000000000000000000000000/runs"),
        ("POST", "/v1/schedules/sch_00000000000000000000000000/trigger"),
    ]:
        reply = await api.call(method, path)
        assert reply.status == 404, path
        assert reply.body["type"] == "urn:steeple:problem:not-found"


async def test_a_run_of_a_deleted_schedule_is_readable_but_not_replayable(
    api: Api, db: Any, clock: FakeClock
) -> None:
    created = await api.create()
    triggered = (await api.call("POST", f"/v1/schedules/{created['id']}/trigger")).body
    deliver_due(db, now=clock.now)
    await api.call("DELETE", f"/v1/schedules/{created['id']}")
    assert (await api.call("GET", f"/v1/runs/{triggered['id']}")).status == 200
    reply = await api.call("POST", f"/v1/runs/{triggered['id']}/replay")
    assert reply.status == 409
    assert "deleted" in reply.body["detail"]


@pytest.mark.parametrize(
    ("catchup", "reason"),
    [
        ({"policy": "skip"}, "catchup_skip"),
        ({"policy": "latest"}, "catchup_latest_superseded"),
        ({"policy": "all"}, "outside_catchup_window"),
    ],
)
async def test_past_a_hundred_misses_in_one_pass_every_missed_row_shows_its_reason(
    api: Api, db: Database, catchup: dict[str, str], reason: str
) -> None:
    """Past ``max_missed_events`` a pass writes only a summary event, so the reason of
    each missed occurrence must be on its row for the runs lists to show it."""
    created = await api.create(cron="* * * * *", catchup=catchup)
    sid = created["id"]
    result = db.write_now(plan_once, now=START + 3 * HOUR, config=PlannerConfig())
    assert result.missed > PlannerConfig().max_missed_events
    events = db.read_now(
        list_events, tenant_id=api.tenant_id, limit=1000, types=frozenset({EventType.RUN_MISSED})
    )
    assert events and {event.run_id for event in events} == {None}  # only summaries
    announced = Counter[object]()
    for event in events:
        announced[event.data["reason"]] += int(str(event.data["count"]))
    assert announced[reason] > 0
    lists = {
        "schedule": (f"/v1/schedules/{sid}/runs", {}),
        "tenant": ("/v1/runs", {"state": "missed", "schedule_id": sid}),
    }
    for path, query in lists.values():
        missed: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = query | {"limit": "200"} | ({"cursor": cursor} if cursor else {})
            reply = await api.call("GET", path, query=page)
            assert reply.status == 200, reply.body
            missed.extend(r for r in reply.body["items"] if r["state"] == "missed")
            cursor = reply.body["next_cursor"]
            if cursor is None:
                break
        assert len(missed) == result.missed
        assert Counter(run["failure_reason"] for run in missed) == announced
