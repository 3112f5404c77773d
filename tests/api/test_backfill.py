"""``POST /v1/schedules/{id}/backfill`` through the real app: past occurrences without a
run are materialised oldest first and paced, existing rows (missed ones too) are left
alone, a dry run writes nothing, and a range past ``max`` is a 422 (docs/schedules.md)."""

from __future__ import annotations

from typing import Any

from appliance.core.instants import format_instant
from appliance.store.infra.database import Database
from appliance.store.runs import list_runs
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.api.conftest import REPLAY_RATE, START, Api, FakeClock, Nudges

HOUR = 3_600_000
DAY = 24 * HOUR


def path(sid: str) -> str:
    return f"/v1/schedules/{sid}/backfill"


def runs(db: Database, api: Api, sid: str) -> list[tuple[int, str, int]]:
    found = db.read_now(list_runs, tenant_id=api.tenant_id, schedule_id=sid, limit=1000)
    return sorted((r.scheduled_for, r.state.value, r.due_at) for r in found)


async def hourly_with_history(api: Api, db: Database, clock: FakeClock) -> tuple[str, int]:
    """An hourly schedule created 2 days before START with catch-up `skip`, planned once at
    START - 1 day + 30 min: its rows before that are `missed`."""
    clock.now = START - 2 * DAY
    created = await api.create(cron="0 * * * *", catchup={"policy": "skip"})
    db.write_now(plan_once, now=START - DAY + HOUR // 2, config=PlannerConfig())
    clock.now = START
    return created["id"], START - START % HOUR  # the last full hour before START


async def test_a_dry_run_counts_and_writes_nothing(
    api: Api, db: Database, clock: FakeClock
) -> None:
    sid, hour = await hourly_with_history(api, db, clock)
    before = runs(db, api, sid)
    body: dict[str, Any] = {
        "from": format_instant(hour - 2 * DAY),
        "to": format_instant(hour),
        "dry_run": True,
    }
    reply = await api.call("POST", path(sid), json_body=body)
    assert reply.status == 200, reply.body
    assert reply.body["occurrences"] == 49 and reply.body["materialised"] == 0
    assert reply.body["existing"] == len(before) == 24
    assert reply.body["missing"] == 25
    # before the creation too: the occurrences are the timing's, not the history's
    assert reply.body["first_scheduled_for"] == format_instant(hour - 2 * DAY)
    assert reply.body["last_scheduled_for"] == format_instant(hour)
    assert runs(db, api, sid) == before


async def test_backfill_fills_only_the_gaps_oldest_first_and_paced(
    api: Api, db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    sid, hour = await hourly_with_history(api, db, clock)
    before = {r[0]: r for r in runs(db, api, sid)}
    assert {state for _, state, _ in before.values()} == {"missed"}
    body = {"from": format_instant(hour - 2 * DAY), "to": format_instant(hour)}
    nudged = nudges.count
    reply = await api.call("POST", path(sid), json_body=body)
    assert reply.status == 200, reply.body
    assert (reply.body["materialised"], reply.body["existing"]) == (25, 24)
    assert nudges.count == nudged + 1
    after = runs(db, api, sid)
    for sched, state, due in after:
        if sched in before:
            assert (sched, state, due) == before[sched]  # missed rows left alone
    new = [r for r in after if r[0] not in before]
    assert [r[1] for r in new] == ["pending"] * 25
    step = 1000 // REPLAY_RATE
    assert [r[2] for r in new] == [START + n * step for n in range(25)]  # oldest first
    again = await api.call("POST", path(sid), json_body=body)
    assert (again.body["materialised"], again.body["missing"]) == (0, 0)  # no second row
    assert runs(db, api, sid) == after


async def test_bad_ranges_are_422_naming_the_field_and_change_nothing(
    api: Api, db: Database, clock: FakeClock
) -> None:
    sid, hour = await hourly_with_history(api, db, clock)
    before = runs(db, api, sid)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"from": format_instant(hour), "to": format_instant(START + HOUR)}, "to"),
        ({"from": format_instant(hour), "to": format_instant(hour - HOUR)}, "to"),
        ({"to": format_instant(hour)}, "from"),
        ({"from": "yesterday", "to": format_instant(hour)}, "from"),
        ({"from": format_instant(hour - 2 * DAY), "to": format_instant(hour), "max": 10}, "max"),
        ({"from": format_instant(hour), "to": format_instant(hour), "max": 10_001}, "max"),
        ({"from": format_instant(hour), "to": format_instant(hour), "extra": 1}, "extra"),
    ]
    for body, field in cases:
        reply = await api.call("POST", path(sid), json_body=body)
        assert (reply.status, reply.fields) == (422, [field]), (body, reply.body)
    assert (
        "more than 10 occurrences"
        in (await api.call("POST", path(sid), json_body=cases[4][0])).body["errors"][0]["message"]
    )
    fine = {"from": format_instant(hour), "to": format_instant(hour)}
    missing = await api.call("POST", path("sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB"), json_body=fine)
    assert missing.status == 404, missing.body
    assert runs(db, api, sid) == before
