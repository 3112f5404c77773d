"""One-off (``at``) and interval (``every``) schedules, ``start_at``/``end_at`` bounds and
``status`` through the real app and the real planner (docs/schedules.md)."""

from __future__ import annotations

from typing import Any

from appliance.core.instants import format_instant, parse_instant
from appliance.store.infra.database import Database
from appliance.store.runs import list_runs
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.api.conftest import START, Api, FakeClock, schedule_json

SECOND = 1000


def plan(db: Database, now: int) -> int:
    return db.write_now(plan_once, now=now, config=PlannerConfig()).materialised


def runs(db: Database, api: Api, schedule_id: str) -> list[tuple[int, str]]:
    found = db.read_now(list_runs, tenant_id=api.tenant_id, schedule_id=schedule_id, limit=100)
    return sorted((run.scheduled_for, run.state.value) for run in found)


async def get(api: Api, schedule_id: str) -> dict[str, Any]:
    reply = await api.call("GET", f"/v1/schedules/{schedule_id}")
    assert reply.status == 200, reply.body
    return reply.body  # type: ignore[no-any-return]


async def test_a_one_off_fires_exactly_once_then_shows_completed(
    api: Api, db: Database, clock: FakeClock
) -> None:
    at = START - START % 1000 + 3600 * SECOND
    created = await api.create(cron=..., at=format_instant(at))
    assert created["cron"] is None and created["at"] == format_instant(at)
    assert created["status"] == "active"
    assert [r["scheduled_for"] for r in created["next_runs"]] == [format_instant(at)]
    assert plan(db, at - 10 * SECOND) == 0  # not yet within the lookahead
    assert plan(db, at - SECOND) == 1
    assert runs(db, api, created["id"]) == [(at, "pending")]
    clock.advance(at - START)
    after = await get(api, created["id"])
    assert (after["status"], after["next_runs"]) == ("completed", [])
    for later in (at, at + 3600 * SECOND, at + 400 * 86_400 * SECOND):
        assert plan(db, later) == 0
    assert runs(db, api, created["id"]) == [(at, "pending")]


async def test_an_at_with_an_offset_is_the_same_instant_in_utc(api: Api) -> None:
    created = await api.create(cron=..., at="2026-03-02T12:30:00+01:00")
    assert created["at"] == "2026-03-02T11:30:00Z"


async def test_an_interval_is_anchored_at_creation_and_counted_in_utc(
    api: Api, db: Database
) -> None:
    created = await api.create(cron=..., every="90s", timezone="Europe/Berlin")
    anchor = START - START % 1000
    assert created["start_at"] == format_instant(anchor)
    assert created["every_seconds"] == 90
    expected = [anchor + k * 90 * SECOND for k in range(1, 6)]
    assert [parse_instant(r["scheduled_for"]) for r in created["next_runs"]] == expected
    plan(db, anchor + 10 * 60 * SECOND)
    assert [s for s, _ in runs(db, api, created["id"])] == [
        anchor + k * 90 * SECOND for k in range(1, 7)
    ]


async def test_an_interval_with_start_and_end_plans_only_inside_them(
    api: Api, db: Database
) -> None:
    start = parse_instant("2026-03-02T12:00:00Z")
    created = await api.create(
        cron=...,
        every_seconds=3600,
        start_at="2026-03-02T12:00:00Z",
        end_at="2026-03-02T15:00:00Z",
        catchup={"policy": "all", "window_seconds": 86_400},
    )
    assert created["next_runs"][0]["scheduled_for"] == "2026-03-02T12:00:00Z"
    assert len(created["next_runs"]) == 4  # 12:00, 13:00, 14:00, 15:00 (inclusive)
    plan(db, start + 86_400 * SECOND)
    assert runs(db, api, created["id"]) == [
        (start + h * 3600 * SECOND, "pending") for h in range(4)
    ]
    assert (await get(api, created["id"]))["status"] == "completed"


async def test_a_cron_with_bounds_plans_nothing_outside_them(api: Api, db: Database) -> None:
    created = await api.create(
        cron="0 * * * *", start_at="2026-03-02T13:00:00Z", end_at="2026-03-02T14:30:00Z"
    )
    planned = [r["scheduled_for"] for r in created["next_runs"]]
    assert planned == ["2026-03-02T13:00:00Z", "2026-03-02T14:00:00Z"]


async def test_exactly_one_kind_is_required_naming_the_fields(api: Api) -> None:
    both = await api.call(
        "POST", "/v1/schedules", json_body=schedule_json(at="2026-03-03T00:00:00Z")
    )
    assert both.status == 422 and both.fields == ["at"]
    assert "cron and at" in both.body["errors"][0]["message"]
    neither = await api.call("POST", "/v1/schedules", json_body=schedule_json(cron=...))
    assert neither.status == 422 and neither.fields == ["cron"]
    assert "every" in neither.body["errors"][0]["message"]
    twins = await api.call(
        "POST", "/v1/schedules", json_body=schedule_json(cron=..., every="1m", every_seconds=60)
    )
    assert twins.status == 422 and twins.fields == ["every_seconds"]


async def test_bad_timing_values_are_refused_with_their_field(api: Api) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"cron": ..., "every": "0s"}, "every"),
        ({"cron": ..., "every": "15 minutes"}, "every"),
        ({"cron": ..., "every": "400d"}, "every"),
        ({"cron": ..., "every_seconds": 0}, "every_seconds"),
        ({"cron": ..., "at": "2026-03-03T00:00:00"}, "at"),  # no offset
        ({"cron": ..., "at": "2026-03-03T00:00:00.5Z"}, "at"),  # not a whole second
        ({"cron": ..., "at": "2026-03-01T00:00:00Z"}, "at"),  # in the past
        ({"start_at": "2026-03-04T00:00:00Z", "end_at": "2026-03-03T00:00:00Z"}, "end_at"),
        ({"end_at": "2026-03-02T10:01:00Z"}, "end_at"),  # */5 next fires at 10:05
        (
            {"cron": ..., "at": "2026-03-05T00:00:00Z", "end_at": "2026-03-04T00:00:00Z"},
            "at",
        ),
    ]
    for overrides, field in cases:
        reply = await api.call("POST", "/v1/schedules", json_body=schedule_json(**overrides))
        assert (reply.status, reply.fields) == (422, [field]), (overrides, reply.body)
    listed = await api.call("GET", "/v1/schedules")
    assert listed.body["items"] == []  # nothing was created


async def test_patch_switches_kinds_and_replans(api: Api, db: Database) -> None:
    created = await api.create()
    sid = created["id"]
    plan(db, START + 30 * 60 * SECOND)  # cron */5 rows up to 10:30
    reply = await api.call("PATCH", f"/v1/schedules/{sid}", json_body={"every": "2h"})
    assert reply.status == 200, reply.body
    assert (reply.body["cron"], reply.body["every_seconds"]) == (None, 7200)
    anchor = START - START % 1000
    assert reply.body["start_at"] == format_instant(anchor)
    back = await api.call("PATCH", f"/v1/schedules/{sid}", json_body={"at": "2026-03-05T00:00:00Z"})
    assert back.status == 200, back.body
    assert (back.body["every_seconds"], back.body["at"]) == (None, "2026-03-05T00:00:00Z")
    assert back.body["next_runs"] == [
        {"scheduled_for": "2026-03-05T00:00:00Z", "due_at": "2026-03-05T00:00:00Z"}
    ]
    two = await api.call(
        "PATCH", f"/v1/schedules/{sid}", json_body={"cron": "0 * * * *", "every": "1h"}
    )
    assert two.status == 422 and two.fields == ["every"]


async def test_a_patch_that_leaves_other_fields_keeps_a_completed_one_off(
    api: Api, db: Database, clock: FakeClock
) -> None:
    at = START - START % 1000 + 60 * SECOND
    created = await api.create(cron=..., at=format_instant(at))
    plan(db, at)
    clock.advance(120 * SECOND)
    renamed = await api.call("PATCH", f"/v1/schedules/{created['id']}", json_body={"name": "x"})
    assert renamed.status == 200, renamed.body
    assert renamed.body["status"] == "completed"
    moved = await api.call(
        "PATCH", f"/v1/schedules/{created['id']}", json_body={"at": format_instant(at + 3600_000)}
    )
    assert moved.status == 200 and moved.body["status"] == "active"


async def test_the_preview_covers_every_kind(api: Api) -> None:
    every = await api.call(
        "POST",
        "/v1/cron/preview",
        json_body={
            "every": "15m",
            "start_at": "2026-03-29T00:00:00Z",
            "count": 3,
            "timezone": "Europe/Berlin",
        },
    )
    assert every.status == 200, every.body
    assert every.body["kind"] == "every" and every.body["every_seconds"] == 900
    assert [o["scheduled_for"] for o in every.body["occurrences"]] == [
        "2026-03-29T00:00:00Z",
        "2026-03-29T00:15:00Z",
        "2026-03-29T00:30:00Z",
    ]
    at = await api.call("POST", "/v1/cron/preview", json_body={"at": "2026-12-24T18:00:00+01:00"})
    assert at.body["kind"] == "at" and at.body["day_rule"] is None
    assert at.body["occurrences"] == [
        {
            "scheduled_for": "2026-12-24T17:00:00Z",
            "local_time": "2026-12-24T17:00:00",
            "utc_offset": "+00:00",
            "dst": None,
            "dst_note": None,
        }
    ]
    bounded = await api.call(
        "POST",
        "/v1/cron/preview",
        json_body={"cron": "0 0 * * *", "end_at": "2026-03-04T00:00:00Z", "count": 10},
    )
    assert [o["scheduled_for"] for o in bounded.body["occurrences"]] == [
        "2026-03-03T00:00:00Z",
        "2026-03-04T00:00:00Z",
    ]
    none = await api.call("POST", "/v1/cron/preview", json_body={"count": 3})
    assert none.status == 422 and none.fields == ["cron"]


async def test_overlap_is_a_field_with_a_default_and_a_closed_set(api: Api) -> None:
    created = await api.create()
    assert created["overlap"] == "allow"
    skip = await api.call("PATCH", f"/v1/schedules/{created['id']}", json_body={"overlap": "skip"})
    assert skip.status == 200 and skip.body["overlap"] == "skip"
    bad = await api.call("POST", "/v1/schedules", json_body=schedule_json(overlap="queue"))
    assert bad.status == 422 and bad.fields == ["overlap"]
    assert "allow, skip, buffer_one" in bad.body["errors"][0]["message"]
