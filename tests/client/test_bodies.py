"""The pure parts of the client: a create or edit body from flags, and the SSE parser."""

from __future__ import annotations

import pytest

from appliance.client.events import Message, SseParser
from appliance.client.schedules import ScheduleFlags, create_body, patch_body
from appliance.errors import ValidationError


def test_flags_lie_over_the_json_document() -> None:
    flags = ScheduleFlags(
        from_json={"name": "file", "cron": "0 3 * * *", "retry": {"max_attempts": 3}},
        name="flag",
        method="get",
        key="nightly-report",
        payload='{"a": [1, 2]}',
    )
    assert create_body(flags) == {
        "name": "flag",
        "cron": "0 3 * * *",
        "retry": {"max_attempts": 3},
        "method": "GET",
        "key": "nightly-report",
        "payload": {"a": [1, 2]},
    }


def test_an_edit_header_changes_the_stored_set_case_insensitively() -> None:
    stored = {"Authorization": "Bearer x", "X-Team": "ops"}
    flags = ScheduleFlags(headers=("x-team: billing", "X-New:1"), remove_headers=("AUTHORIZATION",))
    assert patch_body(flags, stored_headers=stored) == {
        "headers": {"x-team": "billing", "X-New": "1"}
    }


def test_an_edit_timing_flag_resets_the_other_kinds_and_a_create_does_not() -> None:
    every = ScheduleFlags(every="15m")
    assert patch_body(every, stored_headers={}) == {
        "cron": None, "every_seconds": None, "at": None, "every": "15m",
    }  # fmt: skip
    assert create_body(every) == {"every": "15m"}


def test_an_edit_to_a_bodiless_method_drops_the_stored_body_and_a_create_does_not() -> None:
    to_get = ScheduleFlags(method="get")
    assert patch_body(to_get, stored_headers={}) == {
        "method": "GET", "payload": None, "body": None, "payload_template": None,
    }  # fmt: skip
    assert create_body(to_get) == {"method": "GET"}
    with_body = ScheduleFlags(method="DELETE", body="x")  # given: the API says why not
    assert patch_body(with_body, stored_headers={}) == {"method": "DELETE", "body": "x"}
    assert patch_body(ScheduleFlags(method="PUT"), stored_headers={}) == {"method": "PUT"}


def test_every_bad_flag_is_named_at_once() -> None:
    with pytest.raises(ValidationError) as bad:
        create_body(ScheduleFlags(payload="{", headers=("nocolon", ": empty name")))
    assert [e.field for e in bad.value.errors] == ["--payload", "--header", "--header"]


def test_sse_messages_comments_multiline_data_and_retry() -> None:
    parser = SseParser()
    lines = [
        "retry: 1000", "", ": heartbeat", "", "id: 7", "event: schedule.created",
        "data: {\"a\":", "data: 1}", "", "id: 8", "data:{}", "",
    ]  # fmt: skip
    messages = [m for m in map(parser.feed, lines) if m is not None]
    assert messages == [
        Message(id="7", event="schedule.created", data='{"a":\n1}'),
        Message(id="8", event="message", data="{}"),
    ]
    assert parser.retry_ms == 1000


def test_a_header_flag_extends_headers_given_as_pairs() -> None:
    flags = ScheduleFlags(from_json={"headers": [["X-A", "1"], ["X-B", "2"]]}, headers=("x-b: 3",))
    assert create_body(flags) == {"headers": {"X-A": "1", "x-b": "3"}}
