"""The delivery request (ADR 0032, ADR 0034): vectors, stability across attempts, and the
tenant-header rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from appliance.core.delivery import (
    MAX_TENANT_HEADER_BYTES,
    MAX_TENANT_HEADERS,
    RESERVED_HEADERS,
    DeliveryRequest,
    build_request,
    check_tenant_headers,
)
from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import parse_instant
from appliance.core.schedules import Method
from appliance.core.signing import SignatureError, verify
from appliance.errors import ValidationError

SCHEDULE_ID = "sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB"
SCHEDULED_FOR = "2026-08-06T03:00:00Z"


def _request(
    vectors: dict[str, Any],
    *,
    attempt: int = 1,
    signed_at_s: int | None = None,
    case_index: int = 1,
    tenant_headers: tuple[tuple[str, str], ...] = (),
) -> DeliveryRequest:
    case = vectors["signatures"][case_index]
    return build_request(
        target_url="https://hooks.example.com/steeple",
        body=case["body"].encode(),
        content_type="application/json",
        tenant_headers=tenant_headers,
        schedule_id=SCHEDULE_ID,
        run_id=run_id(SCHEDULE_ID, SCHEDULED_FOR),
        attempt=attempt,
        scheduled_for_ms=parse_instant(SCHEDULED_FOR),
        idempotency_key=idempotency_key(SCHEDULE_ID, SCHEDULED_FOR),
        secrets=case["secrets"],
        signed_at_s=int(case["timestamp"]) if signed_at_s is None else signed_at_s,
        user_agent="Steeple/0.1.0",
    )


def _headers(request: DeliveryRequest) -> dict[str, str]:
    names = [name.lower() for name, _ in request.headers]
    assert len(names) == len(set(names)), "no header is sent twice"
    return {name.lower(): value for name, value in request.headers}


def test_vector_case_one_active_secret_is_byte_exact(vectors: dict[str, Any]) -> None:
    case = vectors["signatures"][1]
    assert case["note"] == "one active secret"
    assert case["id"] == idempotency_key(SCHEDULE_ID, SCHEDULED_FOR)
    request = _request(vectors)
    headers = _headers(request)
    assert headers["x-signature"] == case["signature"]
    assert headers["webhook-signature"] == case["signature"]
    assert headers["x-idempotency-key"] == headers["webhook-id"] == case["id"]
    assert headers["x-signature-timestamp"] == headers["webhook-timestamp"] == case["timestamp"]
    assert request.body == case["body"].encode()
    assert request.url == "https://hooks.example.com/steeple"


def test_rotation_vector_signs_with_every_secret_newest_first(vectors: dict[str, Any]) -> None:
    case = vectors["signatures"][2]
    assert _headers(_request(vectors, case_index=2))["x-signature"] == case["signature"]


def test_every_contract_header_is_present(vectors: dict[str, Any]) -> None:
    headers = _headers(_request(vectors, attempt=3))
    assert headers["x-schedule-id"] == SCHEDULE_ID
    assert headers["x-run-id"] == run_id(SCHEDULE_ID, SCHEDULED_FOR)
    assert headers["x-attempt"] == "3"
    assert headers["x-scheduled-for"] == SCHEDULED_FOR
    assert headers["user-agent"] == "Steeple/0.1.0"
    assert headers["content-type"] == "application/json"
    assert headers["accept-encoding"] == "identity"


def test_key_and_scheduled_for_are_stable_across_attempts(vectors: dict[str, Any]) -> None:
    base = int(vectors["signatures"][1]["timestamp"])
    attempts = [
        _headers(_request(vectors, attempt=n, signed_at_s=base + 60 * n)) for n in (1, 2, 3)
    ]
    assert {h["x-idempotency-key"] for h in attempts} == {
        idempotency_key(SCHEDULE_ID, SCHEDULED_FOR)
    }
    assert {h["x-scheduled-for"] for h in attempts} == {SCHEDULED_FOR}
    assert [h["x-attempt"] for h in attempts] == ["1", "2", "3"]
    assert len({h["x-signature-timestamp"] for h in attempts}) == 3
    assert len({h["x-signature"] for h in attempts}) == 3


def test_each_attempt_verifies_with_its_own_timestamp(vectors: dict[str, Any]) -> None:
    case = vectors["signatures"][1]
    signed_at = int(case["timestamp"]) + 7200
    request = _request(vectors, attempt=4, signed_at_s=signed_at)
    headers = _headers(request)
    verify(
        case["secrets"],
        headers["x-idempotency-key"],
        int(headers["x-signature-timestamp"]),
        request.body,
        headers["x-signature"],
        now_s=signed_at,
    )


def test_tenant_headers_are_sent_after_the_contract(vectors: dict[str, Any]) -> None:
    request = _request(vectors, tenant_headers=(("Authorization", "Bearer t0k"),))
    assert request.headers[-1] == ("Authorization", "Bearer t0k")


def test_a_stored_reserved_header_never_overrides_the_contract(vectors: dict[str, Any]) -> None:
    request = _request(vectors, tenant_headers=(("x-attempt", "99"), ("X-Team", "billing")))
    headers = _headers(request)
    assert headers["x-attempt"] == "1"
    assert headers["x-team"] == "billing"


def test_scheduled_for_must_be_canonical_whole_seconds(vectors: dict[str, Any]) -> None:
    case = vectors["signatures"][1]
    with pytest.raises(ValueError, match="whole second"):
        build_request(
            target_url="https://hooks.example.com/",
            body=b"",
            content_type="application/json",
            tenant_headers=(),
            schedule_id=SCHEDULE_ID,
            run_id="run_x",
            attempt=1,
            scheduled_for_ms=parse_instant(SCHEDULED_FOR) + 250,  # a jittered due_at
            idempotency_key=case["id"],
            secrets=case["secrets"],
            signed_at_s=1,
            user_agent="Steeple/0.1.0",
        )


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_is_one_based(vectors: dict[str, Any], attempt: int) -> None:
    with pytest.raises(ValueError, match="1-based"):
        _request(vectors, attempt=attempt)


def test_signing_needs_a_secret(vectors: dict[str, Any]) -> None:
    with pytest.raises(SignatureError):
        build_request(
            target_url="https://hooks.example.com/",
            body=b"",
            content_type="application/json",
            tenant_headers=(),
            schedule_id=SCHEDULE_ID,
            run_id="run_x",
            attempt=1,
            scheduled_for_ms=0,
            idempotency_key="k",
            secrets=[],
            signed_at_s=1,
            user_agent="Steeple/0.1.0",
        )


# --- tenant headers --------------------------------------------------------------------


def _only_error(value: object) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        check_tenant_headers(value)
    assert len(caught.value.errors) == 1, caught.value.errors
    error = caught.value.errors[0]
    return error.field, error.message


def test_valid_headers_in_both_shapes() -> None:
    expected = (("Authorization", "Bearer abc"), ("X-Team", "billing"), ("X-Empty", ""))
    as_object = {"Authorization": "Bearer abc", "X-Team": "billing", "X-Empty": ""}
    assert check_tenant_headers(as_object) == expected
    assert check_tenant_headers([list(pair) for pair in expected]) == expected
    assert check_tenant_headers(None) == ()
    assert check_tenant_headers({}) == ()


_CONTRACT_NAMES = [
    "X-Idempotency-Key",
    "X-Schedule-Id",
    "X-Run-Id",
    "X-Attempt",
    "X-Scheduled-For",
    "X-Signature-Timestamp",
    "X-Signature",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "User-Agent",
    "Content-Type",
    "Accept-Encoding",
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
]
_PREFIXED_NAMES = ["X-Signature-V2", "X-Idempotency", "X-Idempotency-Hint", "Webhook-Foo"]


def _case_variants(name: str) -> list[str]:
    return [name, name.lower(), name.upper(), name.swapcase()]


@pytest.mark.parametrize(
    "name",
    [variant for name in _CONTRACT_NAMES + _PREFIXED_NAMES for variant in _case_variants(name)],
)
def test_reserved_names_are_refused_in_any_case(name: str) -> None:
    field, message = _only_error({name: "value"})
    assert field == f"headers.{name}"
    assert "reserved" in message
    assert "remove it" in message


def test_reserved_set_is_lower_case_and_covers_every_header_steeple_sends() -> None:
    assert all(name == name.lower() for name in RESERVED_HEADERS)
    request = build_request(
        target_url="https://hooks.example.com/",
        body=b"{}",
        content_type="application/json",
        tenant_headers=(),
        schedule_id=SCHEDULE_ID,
        run_id="run_x",
        attempt=1,
        scheduled_for_ms=0,
        idempotency_key="k",
        secrets=["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
        signed_at_s=1,
        user_agent="Steeple/0.1.0",
    )
    assert {name.lower() for name, _ in request.headers} <= RESERVED_HEADERS


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("Bad Name", "v", "not a valid header name"),
        ("X-Colon:", "v", "not a valid header name"),
        ("", "v", "not a valid header name"),
        ("X-Ünicode", "v", "not a valid header name"),
        ("X-Split", "a\r\nX-Evil: 1", "line break"),
        ("X-Lf", "a\nb", "line break"),
        ("X-Nul", "a\x00b", "NUL"),
        ("X-Bell", "a\x07b", "control"),
        ("X-Accent", "café", "non-ASCII"),
        ("X-Padded", " value", "starts or ends"),
    ],
)
def test_invalid_names_and_values_say_what_to_fix(name: str, value: str, says: str) -> None:
    field, message = _only_error({name: value})
    assert field == f"headers.{name}"
    assert says in message


def test_non_string_values_are_refused_per_header() -> None:
    field, message = _only_error({"X-Count": 5})
    assert field == "headers.X-Count"
    assert 'e.g. "5"' in message


@pytest.mark.parametrize("value", ["X-Team: billing", 42, ["X-Team"], [["X-Team", "a", "b"]]])
def test_wrong_shapes_are_refused_as_a_whole(value: object) -> None:
    field, message = _only_error(value)
    assert field == "headers"
    assert "e.g." in message


def test_duplicate_names_differing_in_case_are_refused() -> None:
    field, message = _only_error([["X-Team", "a"], ["x-team", "b"]])
    assert field == "headers.x-team"
    assert "twice" in message


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        check_tenant_headers({"Host": "evil", "X-Ok": "fine", "Bad Name": "v"})
    assert [e.field for e in caught.value.errors] == ["headers.Host", "headers.Bad Name"]


def test_at_most_fifty_headers() -> None:
    assert len(check_tenant_headers({f"X-H{i}": "v" for i in range(MAX_TENANT_HEADERS)})) == 50
    field, message = _only_error({f"X-H{i}": "v" for i in range(MAX_TENANT_HEADERS + 1)})
    assert field == "headers"
    assert "51 headers" in message


def test_at_most_eight_kib_in_total() -> None:
    fits = {"X-Big": "a" * (MAX_TENANT_HEADER_BYTES - len("X-Big"))}
    assert check_tenant_headers(fits) == (("X-Big", fits["X-Big"]),)
    field, message = _only_error({"X-Big": "a" * MAX_TENANT_HEADER_BYTES})
    assert field == "headers"
    assert "8197 bytes" in message
    assert "body" in message


@pytest.mark.parametrize("index", range(5))
def test_each_methods_request_vector_is_byte_exact(vectors: dict[str, Any], index: int) -> None:
    """One vector per method: every header in order and the exact body. A body method's
    signature is the body vector's; GET's and DELETE's sign the empty body and are the
    empty-body vector's, and they carry no Content-Type."""
    case = vectors["requests"][index]
    method = Method(case["method"])
    assert [c["method"] for c in vectors["requests"]] == ["POST", "PUT", "PATCH", "GET", "DELETE"]
    request = build_request(
        target_url=case["url"],
        body=b'{"task":"billing-rollup"}',  # a GET's run may hold a body: it is never sent
        content_type="application/json",
        tenant_headers=tuple(tuple(pair) for pair in case["tenant_headers"]),
        schedule_id=case["schedule_id"],
        run_id=run_id(case["schedule_id"], case["scheduled_for"]),
        attempt=case["attempt"],
        scheduled_for_ms=parse_instant(case["scheduled_for"]),
        idempotency_key=idempotency_key(case["schedule_id"], case["scheduled_for"]),
        secrets=case["secrets"],
        signed_at_s=int(case["timestamp"]),
        user_agent=case["user_agent"],
        method=method,
    )
    assert request.method is method
    assert [list(pair) for pair in request.headers] == case["headers"]
    assert request.body == case["body"].encode()
    signed = vectors["signatures"][1 if method.carries_body else 3]
    assert signed["note"] == ("one active secret" if method.carries_body else "empty body")
    headers = _headers(request)
    assert headers["x-signature"] == signed["signature"] == headers["webhook-signature"]
    assert ("content-type" in headers) is method.carries_body
    assert request.body == signed["body"].encode()


@pytest.mark.parametrize("index", range(5))
def test_the_reference_library_signs_each_methods_vector_alike(
    vectors: dict[str, Any], index: int
) -> None:
    """``standardwebhooks`` (the reference library) signs each vector's id, timestamp and
    body, the empty one included, to the vector's signature. (Its ``verify`` checks the
    timestamp against the wall clock: tests/e2e/test_http_methods.py verifies live ones.)"""
    case = vectors["requests"][index]
    headers = dict(case["headers"])
    moment = datetime.fromtimestamp(int(case["timestamp"]), tz=UTC)
    reference = Webhook(case["secrets"][0]).sign(
        msg_id=headers["webhook-id"], timestamp=moment, data=case["body"].encode()
    )
    assert reference == headers["webhook-signature"] == headers["X-Signature"]
