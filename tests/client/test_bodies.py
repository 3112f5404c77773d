"""The pure parts of the client: a create or edit body from flags, and the SSE parser."""

from __future__ import annotations

import pytest

from appliance.client.events import Message, SseParser
from appliance.client.schedules import ScheduleFlags, schedule_body
from appliance.errors import ValidationError


def test_flags_lie_over_the_json_document() -> None:
    flags = ScheduleFlags(
        from_json={"name": "file", "cron": "0 3 * * *", "retry": {"max_attempts": 3}},
        name="flag",
        method="get",
        key="nightly-report",
        payload='{"a": [1, 2]}',
    )
    assert schedule_body(flags) == {
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
    assert schedule_body(flags, stored_headers=stored) == {
        "headers": {"x-team": "billing", "X-New": "1"}
    }


def test_an_edit_timing_flag_resets_the_other_kinds_and_a_create_does_not() -> None:
    every = ScheduleFlags(every="15m")
    assert schedule_body(every, stored_headers={}) == {
        "cron": None, "every_seconds": None, "at": None, "every": "15m",
    }  # fmt: skip
    assert schedule_body(every) == {"every": "15m"}


def test_every_bad_flag_is_named_at_once() -> None:
    with pytest.raises(ValidationError) as bad:
        schedule_body(ScheduleFlags(payload="{", headers=("nocolon", ": empty name")))
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
