"""A tenant's runs across its schedules (``GET /v1/runs``, the dead-letter view) and bulk
replay (``POST /v1/runs/replay``): filters, paging, all-or-nothing ids, ``as_of``, pacing."""

from __future__ import annotations

from typing import Any

from appliance.core.instants import format_instant, parse_instant
from tests.api.conftest import REPLAY_RATE, Api, FakeClock, deliver_due

RUNS, REPLAY = "/v1/runs", "/v1/runs/replay"


async def runs_of_two_schedules(api: Api, db: Any, clock: FakeClock) -> list[dict[str, Any]]:
    """Six runs, oldest first: each second one schedule's run fails (500), the other's
    succeeds; the last one stays pending."""
    first, second = (await api.create())["id"], (await api.create())["id"]
    made = []
    for n in range(6):
        schedule = (first, second)[n % 2]
        made.append((await api.call("POST", f"/v1/schedules/{schedule}/trigger")).body)
        if n < 5:
            deliver_due(db, now=clock.now, status=500 if n % 2 == 0 else 200)
        clock.advance(1000)
    return made


async def ids(api: Api, **query: str | list[str]) -> list[str]:
    reply = await api.call("GET", RUNS, query=query)  # type: ignore[arg-type]
    assert reply.status == 200, reply.body
    return [run["id"] for run in reply.body["items"]]


async def test_the_dead_letter_view_spans_schedules_newest_first_with_filters(
    api: Api, other: Api, db: Any, clock: FakeClock
) -> None:
    made = await runs_of_two_schedules(api, db, clock)
    every = [run["id"] for run in reversed(made)]
    assert await ids(api) == every
    assert await ids(api, state="failed") == [made[4]["id"], made[2]["id"], made[0]["id"]]
    assert await ids(api, state=["failed", "pending"]) == every[:1] + every[1::2]
    assert await ids(api, schedule_id=made[1]["schedule_id"]) == every[::2]
    assert await ids(api, http_status="200") == [made[3]["id"], made[1]["id"]]
    since, until = made[1]["scheduled_for"], made[4]["scheduled_for"]
    assert await ids(api, since=since, until=until) == [made[3]["id"], made[2]["id"], made[1]["id"]]
    assert await ids(other) == []
    failed = (await api.call("GET", RUNS, query={"state": "failed"})).body["items"][0]
    assert (failed["last_status"], failed["last_error"]) == (500, "HTTP 500")


async def test_pages_walk_every_run_once_in_order(api: Api, db: Any, clock: FakeClock) -> None:
    made = await runs_of_two_schedules(api, db, clock)
    seen: list[str] = []
    query = {"limit": "4", "state": ["failed", "succeeded", "pending"]}
    while True:
        body = (await api.call("GET", RUNS, query=query)).body  # type: ignore[arg-type]
        seen.extend(run["id"] for run in body["items"])
        if body["next_cursor"] is None:
            break
        query["cursor"] = body["next_cursor"]
    assert seen == [run["id"] for run in reversed(made)]


async def test_every_bad_parameter_is_named(api: Api) -> None:
    query = {
        "state": "lost",
        "since": "yesterday",
        "until": "2026-01-01T00:00:00",
        "http_status": "abc",
        "limit": "0",
        "colour": "red",
    }
    reply = await api.call("GET", RUNS, query=query)
    assert reply.status == 422
    assert sorted(e["field"] for e in reply.body["errors"]) == sorted(query)
    reply = await api.call("GET", RUNS, query={"cursor": "bm9wZQ"})
    assert [e["field"] for e in reply.body["errors"]] == ["cursor"]
    reply = await api.call("GET", RUNS, query={"http_status": "9" * 5000})
    assert [e["field"] for e in reply.body["errors"]] == ["http_status"]
    backwards = {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    reply = await api.call("GET", RUNS, query=backwards)
    assert [e["field"] for e in reply.body["errors"]] == ["until"]


async def test_replay_by_ids_is_all_or_nothing_and_names_the_culprits(
    api: Api, other: Api, db: Any, clock: FakeClock
) -> None:
    made = await runs_of_two_schedules(api, db, clock)
    finished = [run["id"] for run in made[:5]]
    before = await ids(api, state="pending")
    reply = await other.call("POST", REPLAY, json_body={"run_ids": finished[:2]})
    assert reply.status == 404
    assert finished[0] in reply.body["detail"] and finished[1] in reply.body["detail"]
    reply = await api.call("POST", REPLAY, json_body={"run_ids": [*finished, "run_nope"]})
    assert reply.status == 404 and "run_nope" in reply.body["detail"], reply.body
    assert finished[0] not in reply.body["detail"]
    reply = await api.call("POST", REPLAY, json_body={"run_ids": [*finished, made[5]["id"]]})
    assert reply.status == 409 and made[5]["id"] in reply.body["detail"], reply.body
    assert await ids(api, state="pending") == before  # nothing was replayed
    reply = await api.call("POST", REPLAY, json_body={"run_ids": finished})
    assert reply.body == {
        "matched": 5,
        "replayed": 5,
        "not_replayed": {"open": 0, "schedule_deleted": 0},
    }
    reopened = {run["id"]: run for run in (await api.call("GET", RUNS)).body["items"]}
    for run in made[:5]:  # the same run, same key, due one step apart
        assert reopened[run["id"]]["idempotency_key"] == run["idempotency_key"]
        assert reopened[run["id"]]["state"] == "pending"
    due = sorted(parse_instant(reopened[rid]["due_at"]) for rid in finished)
    assert due == [clock.now + n * 1000 // REPLAY_RATE for n in range(5)]


async def test_replay_by_filter_counts_exactly_and_leaves_later_changes_alone(
    api: Api, other: Api, db: Any, clock: FakeClock
) -> None:
    made = await runs_of_two_schedules(api, db, clock)
    as_of = format_instant(clock.now)
    later = (await api.call("POST", f"/v1/schedules/{made[0]['schedule_id']}/trigger")).body
    deliver_due(db, now=clock.now, status=500)  # it and made[5] fail after as_of
    clock.advance(1000)
    body = {"filter": {"state": ["failed", "pending"]}, "as_of": as_of}
    assert (await other.call("POST", REPLAY, json_body=body)).body["matched"] == 0
    reply = await api.call("POST", REPLAY, json_body=body)
    assert reply.status == 200, reply.body
    expected = {"matched": 3, "replayed": 3, "not_replayed": {"open": 0, "schedule_deleted": 0}}
    assert reply.body == expected
    assert (await api.call("GET", f"/v1/runs/{later['id']}")).body["state"] == "failed"
    again = await api.call("POST", REPLAY, json_body=body)
    assert again.body["replayed"] == 0  # the reopened runs changed after as_of
    # Open runs match but are not replayed: the three reopened ones and a new trigger.
    await api.call("POST", f"/v1/schedules/{made[1]['schedule_id']}/trigger")
    reply = await api.call("POST", REPLAY, json_body={**body, "as_of": format_instant(clock.now)})
    expected = {"matched": 6, "replayed": 2, "not_replayed": {"open": 4, "schedule_deleted": 0}}
    assert reply.body == expected
    reply = await api.call(
        "POST", REPLAY, json_body={**body, "as_of": format_instant(clock.now + 1)}
    )
    assert reply.status == 422 and reply.body["errors"][0]["field"] == "as_of"


async def test_a_bad_replay_body_names_every_field(api: Api) -> None:
    body = {
        "filter": {"state": ["lost"], "http_status": 42, "colour": 1, "until": None},
        "as_of": "now",
    }
    reply = await api.call("POST", REPLAY, json_body=body)
    assert reply.status == 422
    fields = sorted(e["field"] for e in reply.body["errors"])
    assert fields == [
        "as_of",
        "filter.colour",
        "filter.http_status",
        "filter.state",
        "filter.until",
    ]
    reply = await api.call("POST", REPLAY, json_body={"run_ids": ["x"] * 1001})
    assert [e["field"] for e in reply.body["errors"]] == ["run_ids"]
    reply = await api.call("POST", REPLAY, json_body={"run_ids": ["x"], "filter": {}})
    assert "run_ids" in [e["field"] for e in reply.body["errors"]]


async def test_the_bulk_replay_path_advertises_only_its_own_method(api: Api) -> None:
    reply = await api.call("OPTIONS", REPLAY)
    assert set(reply.headers["Allow"].split(", ")) == {"POST", "OPTIONS"}
    assert (await api.call("GET", REPLAY)).status == 405


async def test_a_limit_of_thousands_of_digits_is_a_422_not_a_crash(api: Api) -> None:
    reply = await api.call("GET", RUNS, query={"limit": "9" * 5000})
    assert reply.status == 422 and [e["field"] for e in reply.body["errors"]] == ["limit"]
