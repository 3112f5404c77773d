"""A cron schedule's ``dst`` policy (ADR 0043) and the linter's ``warnings`` through the
real app, the real store and the real planner; the preview's marks and cron in words
(docs/schedules.md)."""

from __future__ import annotations

from typing import Any

from appliance.core.instants import parse_instant
from appliance.store.infra.database import Database
from tests.api.conftest import Api, FakeClock
from tests.api.test_schedule_kinds import get, plan, runs

BERLIN = "Europe/Berlin"
EVE_OF_FOLD = parse_instant("2026-10-24T12:00:00Z")


def next_times(document: dict[str, Any]) -> list[str]:
    return [run["scheduled_for"] for run in document["next_runs"]]


async def test_a_dst_policy_is_stored_echoed_and_planned(
    api: Api, db: Database, clock: FakeClock
) -> None:
    clock.now = EVE_OF_FOLD
    plain = await api.create(cron="30 2 * * *", timezone=BERLIN)
    last = await api.create(cron="30 2 * * *", timezone=BERLIN, dst={"fold": "last"})
    both = await api.create(cron="30 2 * * *", timezone=BERLIN, dst={"fold": "both"})
    assert plain["dst"] is None
    assert last["dst"] == {"gap": None, "fold": "last"}
    assert (await get(api, last["id"]))["dst"] == {"gap": None, "fold": "last"}
    assert next_times(plain)[:2] == ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    assert next_times(last)[:2] == ["2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"]
    assert next_times(both)[:3] == [
        "2026-10-25T00:30:00Z",
        "2026-10-25T01:30:00Z",
        "2026-10-26T01:30:00Z",
    ]
    # The planner materialises the same instants (epoch ms of 00:30Z and 01:30Z).
    plan(db, parse_instant("2026-10-25T02:00:00Z"))
    early, late = parse_instant("2026-10-25T00:30:00Z"), parse_instant("2026-10-25T01:30:00Z")
    assert [at for at, _ in runs(db, api, plain["id"])] == [early]
    assert [at for at, _ in runs(db, api, last["id"])] == [late]
    assert [at for at, _ in runs(db, api, both["id"])] == [early, late]


async def test_a_wildcard_spec_can_shift_its_gap_times(api: Api, clock: FakeClock) -> None:
    clock.now = parse_instant("2026-03-29T00:50:00Z")  # 01:50 CET, before the gap
    skip = await api.create(cron="30 * * * *", timezone=BERLIN)
    shift = await api.create(cron="30 * * * *", timezone=BERLIN, dst={"gap": "shift"})
    # 02:30 does not exist: skipped by default (a wildcard spec), or run at 03:00.
    assert next_times(skip)[:2] == ["2026-03-29T01:30:00Z", "2026-03-29T02:30:00Z"]
    assert next_times(shift)[:2] == ["2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]
    every = await api.create(cron="*/30 * * * *", timezone=BERLIN, dst={"gap": "shift"})
    # 02:00 and 02:30 both shift onto 03:00, itself an occurrence: it fires once.
    assert next_times(every)[:2] == ["2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]


async def test_bad_dst_is_refused_naming_the_field_and_nothing_is_created(api: Api) -> None:
    cases = [
        ({"every": "15m", "cron": ..., "dst": {"gap": "skip"}}, ["dst"]),
        ({"at": "2026-12-24T18:00:00+01:00", "cron": ..., "dst": {"fold": "last"}}, ["dst"]),
        ({"dst": {"gap": "later"}}, ["dst.gap"]),
        ({"dst": {"fold": 2}}, ["dst.fold"]),
        ({"dst": {"when": "always"}}, ["dst.when"]),
        ({"dst": "skip"}, ["dst"]),
    ]
    for overrides, fields in cases:
        body = {
            "name": "n",
            "cron": "30 2 * * *",
            "target_url": "https://hooks.example.com/steeple",
            "payload": {},
        }
        body.update({k: v for k, v in overrides.items() if v is not ...})
        for key in [k for k, v in overrides.items() if v is ...]:
            body.pop(key)
        reply = await api.call("POST", "/v1/schedules", json_body=body)
        assert (reply.status, reply.fields) == (422, fields), (overrides, reply.body)
    listed = await api.call("GET", "/v1/schedules")
    assert listed.body["items"] == []


async def test_a_patch_merges_dst_key_by_key_and_re_plans(api: Api, clock: FakeClock) -> None:
    clock.now = EVE_OF_FOLD
    created = await api.create(cron="30 2 * * *", timezone=BERLIN)
    path = f"/v1/schedules/{created['id']}"
    reply = await api.call("PATCH", path, json_body={"dst": {"fold": "both"}})
    assert reply.status == 200 and reply.body["dst"] == {"gap": None, "fold": "both"}
    assert next_times(reply.body)[1] == "2026-10-25T01:30:00Z"
    reply = await api.call("PATCH", path, json_body={"dst": {"gap": "skip"}})
    assert reply.body["dst"] == {"gap": "skip", "fold": "both"}
    reply = await api.call("PATCH", path, json_body={"dst": {"fold": None}})
    assert reply.body["dst"] == {"gap": "skip", "fold": None}
    assert next_times(reply.body)[:2] == ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    reply = await api.call("PATCH", path, json_body={"dst": {"fold": "last"}})
    switched = await api.call("PATCH", path, json_body={"every": "15m"})
    assert switched.status == 200, switched.body
    assert (switched.body["cron"], switched.body["dst"]) == (None, None)
    refused = await api.call("PATCH", path, json_body={"dst": {"gap": "skip"}})
    assert (refused.status, refused.fields) == (422, ["dst"])


async def test_create_and_update_answers_carry_warnings(api: Api) -> None:
    plain = await api.create()
    assert plain["warnings"] == []
    odd = await api.create(cron="0 0 31 * 5")
    assert [w["code"] for w in odd["warnings"]] == ["dom_dow_both", "day_skips_months"]
    assert "OR" in odd["warnings"][0]["message"]
    path = f"/v1/schedules/{plain['id']}"
    reply = await api.call("PATCH", path, json_body={"jitter_seconds": 300})
    assert reply.status == 200
    assert [w["code"] for w in reply.body["warnings"]] == ["jitter_exceeds_period"]
    again = await api.call("PATCH", path, json_body={"jitter_seconds": 300})  # no change
    assert [w["code"] for w in again.body["warnings"]] == ["jitter_exceeds_period"]
    assert "warnings" not in (await get(api, plain["id"]))
    gap = await api.create(cron="30 2 * * *", timezone=BERLIN)
    assert [w["code"] for w in gap["warnings"]] == ["time_in_dst_gap", "time_in_dst_fold"]
    assert "2026-03-29" in gap["warnings"][0]["message"]
    assert "2026-10-25" in gap["warnings"][1]["message"]
    # A replayed create answers what the first one did, warnings included.
    headers = {"Idempotency-Key": "k-1"}
    body = {
        "name": "n",
        "cron": "0 0 31 * *",
        "target_url": "https://hooks.example.com/steeple",
        "payload": {},
    }
    first = await api.call("POST", "/v1/schedules", json_body=body, headers=headers)
    replay = await api.call("POST", "/v1/schedules", json_body=body, headers=headers)
    assert replay.body["warnings"] == first.body["warnings"] != []


async def test_the_preview_marks_transitions_describes_and_warns(
    api: Api, clock: FakeClock
) -> None:
    clock.now = parse_instant("2026-10-24T12:00:00Z")  # the warnings are as of now
    reply = await api.call(
        "POST",
        "/v1/cron/preview",
        json_body={
            "cron": "30 2 * * *",
            "timezone": BERLIN,
            "after": "2026-10-24T12:00:00Z",
            "count": 3,
            "dst": {"fold": "both"},
        },
    )
    assert reply.status == 200, reply.body
    assert reply.body["description"] == "At 02:30 every day"
    assert reply.body["dst"] == {"gap": None, "fold": "both"}
    assert [(o["scheduled_for"], o["dst"]) for o in reply.body["occurrences"]] == [
        ("2026-10-25T00:30:00Z", "fold_first"),
        ("2026-10-25T01:30:00Z", "fold_last"),
        ("2026-10-26T01:30:00Z", None),
    ]
    assert reply.body["occurrences"][1]["dst_note"] == (
        "02:30 happens twice on 2026-10-25: this is the second time; it runs both times"
        " (dst.fold: both)"
    )
    # In October the fold a day away comes first, not next March's gap.
    assert [w["code"] for w in reply.body["warnings"]] == ["time_in_dst_fold", "time_in_dst_gap"]
    assert reply.body["warnings"][0]["message"].startswith(
        "02:30 happens twice on 2026-10-25 in Europe/Berlin"
    )
    jittery = await api.call(
        "POST", "/v1/cron/preview", json_body={"cron": "*/5 * * * *", "jitter_seconds": 600}
    )
    assert jittery.body["description"] == "Every 5 minutes"
    assert [w["code"] for w in jittery.body["warnings"]] == ["jitter_exceeds_period"]
    one_off = await api.call(
        "POST", "/v1/cron/preview", json_body={"at": "2028-12-24T18:00:00+01:00"}
    )
    assert one_off.body["description"] is None
    assert [w["code"] for w in one_off.body["warnings"]] == ["no_fire_within_year"]
    refused = await api.call(
        "POST",
        "/v1/cron/preview",
        json_body={"every": "1h", "dst": {"gap": "skip"}, "jitter_seconds": -1},
    )
    assert (refused.status, sorted(refused.fields)) == (422, ["dst", "jitter_seconds"])
