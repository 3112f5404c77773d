"""``method`` in core.schedule_input (docs/schedules.md, "HTTP methods"): POST by default
and unchanged; GET and DELETE carry no body, so a body field or a content type with them
is a 422 naming that field and ``method``; merge patches switch between the two kinds."""

from __future__ import annotations

from typing import Any

import pytest

from appliance.core.addresses import AddressPolicy
from appliance.core.schedule_batch import parse_batch
from appliance.core.schedule_input import merge_patch, parse_schedule, schedule_document
from appliance.core.schedules import Method, ScheduleSpec
from appliance.errors import FieldError, ValidationError
from tests.api.conftest import schedule_json

POLICY = AddressPolicy()


def parse(**overrides: Any) -> ScheduleSpec:
    return parse_schedule(schedule_json(**overrides), policy=POLICY)


def refused(**overrides: Any) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        parse(**overrides)
    return [e.field for e in caught.value.errors]


def test_post_is_the_default_and_leaves_the_spec_as_it_was() -> None:
    default, explicit = parse(), parse(method="POST")
    assert default == explicit and default.method is Method.POST
    assert schedule_document(default)["method"] == "POST"


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_put_and_patch_carry_a_body_like_post(method: str) -> None:
    spec = parse(method=method)
    assert spec.method == method and spec.body == b'{"report":"nightly","n":1}'
    assert refused(method=method, payload=...) == ["payload"]  # a body method needs one


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_bodiless_method_needs_no_payload(method: str) -> None:
    spec = parse(method=method, payload=...)
    assert (spec.method, spec.body, spec.content_type, spec.templated) == (method, b"", "", False)
    document = schedule_document(spec)
    assert not {"payload", "body", "payload_template"} & set(document)
    assert document["content_type"] is None and document["method"] == method
    assert parse_schedule(document, policy=POLICY) == spec  # the document round-trips


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize(
    "given",
    [
        {"payload": {"a": 1}},
        {"payload": ..., "body": "x"},
        {"payload": ..., "payload_template": {"at": "{{scheduled_for}}"}},
        {"payload": ..., "content_type": "text/plain"},
    ],
    ids=["payload", "body", "payload_template", "content_type"],
)
def test_a_body_with_a_bodiless_method_names_both_fields(
    method: str, given: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError) as caught:
        parse(method=method, **given)
    (field,) = [key for key, value in given.items() if value is not ...]
    assert [e.field for e in caught.value.errors] == [field, "method"]
    on_field, on_method = caught.value.errors
    assert f"a {method} carries no body" in on_field.message
    assert field in on_method.message and "POST, PUT or PATCH" in on_method.message


@pytest.mark.parametrize("method", ["get", "HEAD", "OPTIONS", "", 1, ["GET"]])
def test_an_unknown_method_is_refused_naming_the_choices(method: object) -> None:
    with pytest.raises(ValidationError) as caught:
        parse(method=method)
    assert caught.value.errors == [
        FieldError(
            field="method", message="must be one of POST, PUT, PATCH, GET, DELETE (upper case)"
        )
    ]


def test_a_patch_to_get_must_drop_the_payload_and_then_drops_the_content_type() -> None:
    spec = parse(payload=..., body="a,b", content_type="text/csv")
    with pytest.raises(ValidationError) as caught:
        merge_patch(spec, {"method": "GET"}, policy=POLICY)
    assert [e.field for e in caught.value.errors] == ["body", "method"]
    assert '"body": null' in caught.value.errors[1].message
    patched = merge_patch(spec, {"method": "GET", "body": None}, policy=POLICY)
    assert (patched.method, patched.body, patched.content_type) == (Method.GET, b"", "")


def test_a_patch_from_get_to_a_body_method_needs_the_body() -> None:
    spec = parse(method="GET", payload=...)
    with pytest.raises(ValidationError) as caught:
        merge_patch(spec, {"method": "PUT"}, policy=POLICY)
    assert [e.field for e in caught.value.errors] == ["payload"]
    patched = merge_patch(spec, {"method": "PUT", "payload": [1]}, policy=POLICY)
    assert (patched.method, patched.body, patched.content_type) == (
        Method.PUT,
        b"[1]",
        "application/json",
    )
    assert merge_patch(spec, {"method": None, "payload": 2}, policy=POLICY).method is Method.POST


def test_a_patch_of_another_field_keeps_a_get_bodiless() -> None:
    spec = parse(method="DELETE", payload=...)
    patched = merge_patch(spec, {"name": "renamed"}, policy=POLICY)
    assert patched == parse(method="DELETE", payload=..., name="renamed")


def test_a_batch_item_reads_its_method_like_a_single_create() -> None:
    get = schedule_json(method="GET", payload=...)
    specs = parse_batch({"schedules": [get, get | {"name": "b"}]}, policy=POLICY)
    assert [(s.method, s.body, s.name) for s in specs] == [
        (Method.GET, b"", "nightly report"),
        (Method.GET, b"", "b"),
    ]
    with pytest.raises(ValidationError) as caught:  # the second item takes the first's spec
        parse_batch({"schedules": [get, get | {"payload": 1}]}, policy=POLICY)
    assert [(e.index, e.field) for e in caught.value.errors] == [(1, "payload"), (1, "method")]
