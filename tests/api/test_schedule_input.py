"""core.schedule_input without the app: defaults, merge-patch rules, round trips, and the
property that any JSON at all either parses or raises ValidationError (never anything
else — that is what keeps bad input from ever becoming a 500)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.addresses import AddressPolicy
from appliance.core.request_input import MAX_BODY_BYTES
from appliance.core.schedule_input import (
    FIELDS,
    merge_patch,
    parse_schedule,
    schedule_document,
)
from appliance.core.schedules import CatchupPolicy, PayloadKind, ScheduleSpec
from appliance.errors import ValidationError
from tests.api.conftest import schedule_json

POLICY = AddressPolicy()


def parse(**overrides: Any) -> ScheduleSpec:
    return parse_schedule(schedule_json(**overrides), policy=POLICY)


def fields_of(error: ValidationError) -> list[str]:
    return [e.field for e in error.errors]


def test_defaults() -> None:
    spec = parse()
    assert spec.timezone == "UTC"
    assert spec.payload_kind is PayloadKind.JSON
    assert spec.content_type == "application/json"
    assert spec.headers == ()
    assert (spec.jitter_seconds, spec.max_attempts, spec.timeout_seconds) == (0, 8, 30)
    assert (spec.catchup_policy, spec.catchup_window_seconds) == (CatchupPolicy.ALL, 3600)
    assert spec.paused is False


def test_payload_is_stored_as_compact_utf8_json() -> None:
    spec = parse(payload={"a": [1, 2], "ü": "ß"})
    assert spec.body == '{"a":[1,2],"ü":"ß"}'.encode()


@pytest.mark.parametrize("size", [MAX_BODY_BYTES, MAX_BODY_BYTES + 1])
def test_the_body_limit_counts_encoded_bytes(size: int) -> None:
    text = "é" * (size // 2) + "x" * (size % 2)  # é is two bytes in UTF-8
    if size <= MAX_BODY_BYTES:
        assert len(parse(payload=..., body=text).body) == size
    else:
        with pytest.raises(ValidationError) as caught:
            parse(payload=..., body=text)
        assert fields_of(caught.value) == ["body"]


def test_the_limit_is_a_parameter() -> None:
    with pytest.raises(ValidationError):
        parse_schedule(schedule_json(payload="x" * 100), policy=POLICY, max_body_bytes=50)


def test_headers_accept_pairs_and_are_echoed_as_an_object() -> None:
    spec = parse(headers=[["X-One", "1"], ["X-Two", "2"]])
    assert spec.headers == (("X-One", "1"), ("X-Two", "2"))
    assert schedule_document(spec)["headers"] == {"X-One": "1", "X-Two": "2"}


def test_cron_and_timezone_errors_are_both_reported() -> None:
    with pytest.raises(ValidationError) as caught:
        parse(cron="0 0 32 * *", timezone="Atlantis/Capital")
    assert sorted(fields_of(caught.value)) == ["cron", "timezone"]


def test_a_bad_timezone_is_reported_when_the_cron_is_not_a_string() -> None:
    with pytest.raises(ValidationError) as caught:
        parse(cron=5, timezone="Atlantis/Capital")
    assert sorted(fields_of(caught.value)) == ["cron", "timezone"]


@pytest.mark.parametrize(
    "overrides", [{}, {"payload": ..., "body": "raw", "content_type": "text/csv"}]
)
def test_document_round_trips(overrides: dict[str, Any]) -> None:
    spec = parse(
        headers={"X-A": "b"},
        jitter_seconds=7,
        catchup={"policy": "latest"},
        retry={"max_attempts": 3},
        **overrides,
    )
    document = schedule_document(spec)
    assert set(document) <= set(FIELDS)
    assert parse_schedule(document, policy=POLICY) == spec


def test_merge_patch_merges_nested_objects_and_null_resets() -> None:
    spec = parse(catchup={"policy": "skip", "window_seconds": 60}, jitter_seconds=9)
    patched = merge_patch(
        spec, {"catchup": {"window_seconds": None}, "jitter_seconds": None}, policy=POLICY
    )
    assert (patched.catchup_policy, patched.catchup_window_seconds) == (CatchupPolicy.SKIP, 3600)
    assert patched.jitter_seconds == 0


def test_merge_patch_replaces_the_payload_whole() -> None:
    spec = parse(payload={"a": 1, "b": 2})
    patched = merge_patch(spec, {"payload": {"a": 3}}, policy=POLICY)
    assert patched.body == b'{"a":3}'


def test_switching_from_body_to_payload_resets_the_content_type() -> None:
    spec = parse(payload=..., body="a,b", content_type="text/csv")
    patched = merge_patch(spec, {"payload": [1]}, policy=POLICY)
    assert (patched.payload_kind, patched.content_type) == (PayloadKind.JSON, "application/json")
    kept = merge_patch(spec, {"payload": [1], "content_type": "application/x+json"}, policy=POLICY)
    assert kept.content_type == "application/x+json"


def test_a_patch_cannot_remove_a_required_field() -> None:
    with pytest.raises(ValidationError) as caught:
        merge_patch(parse(), {"name": None, "payload": None}, policy=POLICY)
    assert fields_of(caught.value) == ["name", "payload"]


def test_a_patch_must_be_an_object() -> None:
    with pytest.raises(ValidationError) as caught:
        merge_patch(parse(), ["name"], policy=POLICY)
    assert fields_of(caught.value) == ["$"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from([*FIELDS, "catchup", "retry", "id", "other"])
DOCUMENTS = st.dictionaries(FIELD_NAMES, JSON, max_size=8).map(lambda extra: schedule_json(**extra))


@settings(max_examples=300, deadline=None)
@given(document=DOCUMENTS | JSON)
def test_any_json_parses_or_raises_validation_error(document: object) -> None:
    try:
        spec = parse_schedule(document, policy=POLICY)
    except ValidationError as error:
        assert error.errors
        assert all(e.message for e in error.errors)  # field may be "" for an unknown key ""
        return
    assert parse_schedule(schedule_document(spec), policy=POLICY) == spec


@settings(max_examples=200, deadline=None)
@given(patch=st.dictionaries(FIELD_NAMES, JSON, max_size=6) | JSON)
def test_any_patch_merges_or_raises_validation_error(patch: object) -> None:
    try:
        merge_patch(parse(), patch, policy=POLICY)
    except ValidationError as error:
        assert error.errors
