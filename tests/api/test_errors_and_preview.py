"""Problem responses for malformed requests (never a 500 for bad input), unknown routes and
methods, and POST /v1/cron/preview."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import Api, schedule_json


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (b"{", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"payload": NaN}', "not valid JSON"),
        (b'{"payload": 1e999}', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (b'{"payload": ' + b"[" * 65 + b"]" * 65 + b"}", "deeper than 64 levels"),
        (b'{"payload": ' + b"[" * 900 + b"]" * 900 + b"}", "nests"),
        (b'{"name": "\\ud800"}', "surrogate"),
        (b'{"n": ' + b"9" * 5000 + b"}", "not valid JSON"),
    ],
)
async def test_malformed_json_is_400(api: Api, data: bytes, detail: str) -> None:
    reply = await api.call(
        "POST", "/v1/schedules", data=data, headers={"Content-Type": "application/json"}
    )
    assert reply.status == 400
    assert detail in reply.body["detail"]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_body_that_is_not_json_is_415(api: Api, content_type: str | None) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    reply = await api.call("POST", "/v1/schedules", data=b"{}", headers=headers)
    assert reply.status == 415


async def test_a_json_suffix_media_type_is_accepted(api: Api) -> None:
    reply = await api.call(
        "POST",
        "/v1/schedules",
        data=b'{"name":"x","cron":"* * * * *","target_url":"https://hooks.example.com/","body":"a"}',
        headers={"Content-Type": "application/vnd.steeple+json; charset=utf-8"},
    )
    assert reply.status == 201


@pytest.mark.parametrize("document", [[], "text", 5, None, True])
async def test_a_json_value_that_is_not_an_object_is_422(api: Api, document: object) -> None:
    reply = await api.call(
        "POST",
        "/v1/schedules",
        data=json.dumps(document),
        headers={"Content-Type": "application/json"},
    )
    assert reply.status == 422
    assert reply.fields == ["$"]


async def test_an_oversized_request_is_413(api: Api) -> None:
    data = b'{"name": "' + b"x" * (300 * 1024) + b'"}'
    reply = await api.call(
        "POST", "/v1/schedules", data=data, headers={"Content-Type": "application/json"}
    )
    assert reply.status == 413


async def test_unknown_route_is_a_404_problem(anonymous: Api) -> None:
    for path in ("/nope", "/v1/schedules/", "/v2/schedules"):
        reply = await anonymous.call("GET", path)
        assert reply.status == 404, path


async def test_wrong_method_is_a_405_problem_with_allow(api: Api) -> None:
    reply = await api.call("PUT", "/v1/schedules/sch_00000000000000000000000000")
    assert reply.status == 405
    assert set(reply.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "PATCH", "DELETE"}


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        -1,
        1.5,
        "",
        "x" * 300,
        [],
        {},
        ["a", 1],
        {"a": {"b": []}},
        [[[]]],
        "\x00",
        "é" * 10,
        10**30,
    ],
)
@pytest.mark.parametrize(
    "key",
    [
        "name",
        "cron",
        "timezone",
        "target_url",
        "payload",
        "body",
        "content_type",
        "headers",
        "jitter_seconds",
        "catchup",
        "retry",
        "timeout_seconds",
        "paused",
    ],
)
async def test_odd_values_in_any_field_never_cause_a_500(api: Api, key: str, value: object) -> None:
    reply = await api.call("POST", "/v1/schedules", json_body=schedule_json(**{key: value}))
    assert reply.status in (201, 422), reply.body


async def test_cron_preview_shows_local_time_and_offset_across_dst(api: Api) -> None:
    reply = await api.call(
        "POST",
        "/v1/cron/preview",
        json_body={
            "cron": "30 2 * * *",
            "timezone": "America/New_York",
            "after": "2026-03-07T00:00:00Z",
            "count": 3,
        },
    )
    assert reply.status == 200
    assert reply.body["occurrences"] == [
        {"scheduled_for": "2026-03-07T07:30:00Z", "local_time": "2026-03-07T02:30:00",
         "utc_offset": "-05:00", "dst": None, "dst_note": None},
        {"scheduled_for": "2026-03-08T07:00:00Z", "local_time": "2026-03-08T03:00:00",
         "utc_offset": "-04:00", "dst": "gap_shifted",
         "dst_note": "02:30 does not exist on 2026-03-08: runs at 03:00"},
        {"scheduled_for": "2026-03-09T06:30:00Z", "local_time": "2026-03-09T02:30:00",
         "utc_offset": "-04:00", "dst": None, "dst_note": None},
    ]  # fmt: skip
    assert (reply.body["cron"], reply.body["timezone"]) == ("30 2 * * *", "America/New_York")


async def test_cron_preview_defaults_to_five_after_now_in_utc(api: Api) -> None:
    reply = await api.call("POST", "/v1/cron/preview", json_body={"cron": "0 12 * * *"})
    assert reply.status == 200
    assert [o["scheduled_for"] for o in reply.body["occurrences"]] == [
        f"2026-03-0{d}T12:00:00Z" for d in (2, 3, 4, 5, 6)
    ]
    assert {o["utc_offset"] for o in reply.body["occurrences"]} == {"+00:00"}


async def test_cron_preview_says_how_two_given_day_fields_combine(api: Api) -> None:
    both = {"cron": "0 0 0 */2 * 1", "after": "2026-08-01T00:00:00Z", "count": 3}
    reply = await api.call("POST", "/v1/cron/preview", json_body=both)
    assert reply.status == 200
    assert reply.body["day_rule"].startswith("both: a day fires only if its day of month")
    assert "combine with AND" in reply.body["day_rule"]
    assert [o["scheduled_for"] for o in reply.body["occurrences"]] == [
        "2026-08-03T00:00:00Z",
        "2026-08-17T00:00:00Z",
        "2026-08-31T00:00:00Z",
    ]
    either = {"cron": "0 0 1,15 * 5", "after": "2026-08-01T00:00:00Z", "count": 3}
    reply = await api.call("POST", "/v1/cron/preview", json_body=either)
    assert "combine with OR" in reply.body["day_rule"]
    assert [o["scheduled_for"][:10] for o in reply.body["occurrences"]] == [
        "2026-08-07",
        "2026-08-14",
        "2026-08-15",
    ]
    one = await api.call("POST", "/v1/cron/preview", json_body={"cron": "0 0 * * 1"})
    assert one.body["day_rule"] is None


@pytest.mark.parametrize(
    ("document", "fields"),
    [
        ({"cron": "0 0 * *"}, ["cron"]),
        ({"cron": "0 0 * * *", "timezone": "Nowhere"}, ["timezone"]),
        ({"cron": "0 0 * * *", "after": "yesterday"}, ["after"]),
        ({"cron": "0 0 * * *", "after": "2026-03-07T00:00:00"}, ["after"]),
        ({"cron": "0 0 * * *", "count": 0}, ["count"]),
        ({"cron": "0 0 * * *", "count": 101}, ["count"]),
        ({"cron": "0 0 * * *", "count": True}, ["count"]),
        ({"cron": "0 0 * * *", "when": 1}, ["when"]),
        ({}, ["cron"]),
    ],
)
async def test_cron_preview_validation(
    api: Api, document: dict[str, object], fields: list[str]
) -> None:
    reply = await api.call("POST", "/v1/cron/preview", json_body=document)
    assert reply.status == 422
    assert reply.fields == fields


@pytest.mark.parametrize(
    ("document", "fields"),
    [
        ({"cron": "0 0 * * *", "after": "9999-12-31T23:59:59Z"}, ["after"]),
        ({"cron": "0 0 * * *", "after": "9999-01-01T00:00:00Z"}, ["after"]),
        ({"cron": "0 0 * * *", "after": "0001-01-01T00:00:00Z"}, ["after"]),
        ({"cron": "0 0 * * *", "after": "0001-01-01T00:00:00-23:59"}, ["after"]),
        ({"cron": "0 0 * * *", "after": "1969-12-31T23:59:59Z"}, ["after"]),
        ({"cron": "0 0 * * *", "timezone": "Europe/" + "x" * 60}, ["timezone"]),
        ({"cron": "0 " * 100 + "0"}, ["cron"]),
    ],
)
async def test_cron_preview_refuses_out_of_range_input_naming_the_field(
    api: Api, document: dict[str, object], fields: list[str]
) -> None:
    reply = await api.call("POST", "/v1/cron/preview", json_body=document)
    assert reply.status == 422, reply.body
    assert reply.fields == fields


async def test_cron_preview_reads_null_as_absent_like_every_body(api: Api) -> None:
    document = {"cron": "0 12 * * *", "timezone": None, "after": None, "count": None}
    reply = await api.call("POST", "/v1/cron/preview", json_body=document)
    assert reply.status == 200
    assert reply.body["timezone"] == "UTC"
    assert [o["scheduled_for"] for o in reply.body["occurrences"]] == [
        f"2026-03-0{d}T12:00:00Z" for d in (2, 3, 4, 5, 6)
    ]


async def test_cron_preview_refuses_a_long_expression_before_parsing_it(api: Api) -> None:
    # Valid cron, 250 KB: the kind that once pinned memory and stalled the event loop.
    huge = ",".join(str(n % 60) for n in range(60_000)) + " * * * *"
    reply = await api.call("POST", "/v1/cron/preview", json_body={"cron": huge})
    assert reply.status == 422
    assert reply.body["errors"] == [
        {"field": "cron", "message": f"is {len(huge)} characters long; at most 200 are allowed"}
    ]
    at_limit = ",".join(["0"] * 92) + " * * * *" + " " * 9  # 200 characters: accepted
    assert len(at_limit) == 200
    reply = await api.call("POST", "/v1/cron/preview", json_body={"cron": at_limit})
    assert reply.status == 200


async def test_cron_preview_ends_before_year_9999_in_any_zone(api: Api) -> None:
    document = {"cron": "* * * * *", "timezone": "Pacific/Kiritimati", "count": 100}
    document["after"] = "9998-12-31T23:57:00Z"
    reply = await api.call("POST", "/v1/cron/preview", json_body=document)
    assert reply.status == 200
    assert [o["scheduled_for"] for o in reply.body["occurrences"]] == [
        "9998-12-31T23:58:00Z",
        "9998-12-31T23:59:00Z",
    ]
    assert reply.body["occurrences"][-1]["local_time"] == "9999-01-01T13:59:00"
    sparse = {"cron": "0 0 29 2 */7", "after": "9900-01-01T00:00:00Z", "count": 100}
    reply = await api.call("POST", "/v1/cron/preview", json_body=sparse)
    assert reply.status == 200
    assert [o["scheduled_for"][:10] for o in reply.body["occurrences"]] == [
        "9920-02-29",
        "9948-02-29",
        "9976-02-29",
    ]


async def test_a_database_failure_is_a_503_problem(api: Api, db: Any) -> None:
    await api.create()
    db.close()  # every later query fails inside the store
    reply = await api.call("GET", "/v1/schedules")
    assert reply.status == 503
    assert reply.headers["Retry-After"] == "5"


async def test_a_payload_nested_to_the_limit_is_accepted(api: Api) -> None:
    deep: object = "leaf"
    for _ in range(63):  # 63 arrays inside the top-level object: 64 levels
        deep = [deep]
    created = await api.create(payload=deep)
    assert created["payload"] == deep
