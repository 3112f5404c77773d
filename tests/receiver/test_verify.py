"""Verification (appliance.receiver.verify): the vectors verify, tampering and junk of any
kind are refused with VerificationError — never TypeError or any other exception — and any
body verifies, JSON or not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.core.delivery import DeliveryRequest
from appliance.core.ids import idempotency_key, run_id
from appliance.core.signing import SignatureError
from appliance.receiver import (
    MemoryDeduper,
    Receiver,
    VerificationError,
    VerifiedDelivery,
    verify_delivery,
)
from tests.receiver.signed import KEY, SCHEDULE_ID, SCHEDULED_FOR, SECRET, SIGNED_AT_S, signed


def _vector_headers(case: dict[str, Any]) -> dict[str, str]:
    """The headers of a delivery exactly as the vector file states them."""
    return {
        "X-Idempotency-Key": case["id"],
        "X-Signature-Timestamp": case["timestamp"],
        "X-Signature": case["signature"],
        "X-Schedule-Id": SCHEDULE_ID,
        "X-Scheduled-For": SCHEDULED_FOR,
        "X-Run-Id": run_id(SCHEDULE_ID, SCHEDULED_FOR),
        "X-Attempt": "2",
    }


def test_the_vectors_verify_with_every_listed_secret(vectors: dict[str, Any]) -> None:
    cases = [case for case in vectors["signatures"] if case["id"] == KEY]
    assert len(cases) == 3
    for case in cases:
        ts = int(case["timestamp"])
        for secret in case["secrets"]:
            delivery = verify_delivery(
                _vector_headers(case), case["body"].encode(), secrets=[secret], now_s=ts
            )
            assert delivery == VerifiedDelivery(
                idempotency_key=case["id"],
                schedule_id=SCHEDULE_ID,
                run_id=run_id(SCHEDULE_ID, SCHEDULED_FOR),
                attempt=2,
                scheduled_for=SCHEDULED_FOR,
                signed_at_s=ts,
                body=case["body"].encode(),
            )
            assert delivery.scheduled_for_datetime().isoformat() == "2026-08-06T03:00:00+00:00"


def test_a_built_request_verifies_and_names_are_case_insensitive() -> None:
    request = signed(attempt=3)
    for transform in (str.lower, str.upper, str):
        headers = [(transform(name), value) for name, value in request.headers]
        delivery = verify_delivery(headers, request.body, secrets=[SECRET], now_s=SIGNED_AT_S)
        assert delivery.attempt == 3


def test_webhook_names_stand_in_for_absent_x_names() -> None:
    request = signed()
    dropped = {"x-idempotency-key", "x-signature-timestamp", "x-signature"}
    headers = {name: value for name, value in request.headers if name.lower() not in dropped}
    delivery = verify_delivery(headers, request.body, secrets=[SECRET], now_s=SIGNED_AT_S)
    assert delivery.idempotency_key == KEY


@pytest.mark.parametrize(
    "body",
    [b"not json at all", b"\xff\xfe\x00binary", b"", b"<xml/>", b'{"unterminated": '],
)
def test_any_body_verifies_not_only_json(body: bytes) -> None:
    """The reference standardwebhooks library refuses these after a good signature
    (docs/receiver.md says so); the helper verifies the bytes and never parses them."""
    request = signed(body=body, content_type="application/octet-stream")
    delivery = verify_delivery(request.headers, body, secrets=[SECRET], now_s=SIGNED_AT_S)
    assert delivery.body == body


def _rejection(headers: dict[str, str], body: bytes, *, now_s: int = SIGNED_AT_S) -> str:
    with pytest.raises(VerificationError) as caught:
        verify_delivery(headers, body, secrets=[SECRET], now_s=now_s)
    return str(caught.value)


def _with(request: DeliveryRequest, **changes: str | None) -> dict[str, str]:
    headers = dict(request.headers)
    for underscored, value in changes.items():
        name = underscored.replace("_", "-")
        if value is None:
            del headers[name]
        else:
            headers[name] = value
    return headers


def test_tampering_is_rejected() -> None:
    request = signed()
    assert "signature" in _rejection(dict(request.headers), b'{"task":"drop-tables"}')
    other_key = idempotency_key(SCHEDULE_ID, "2026-08-06T03:01:00Z")
    assert "signature" in _rejection(_with(request, X_Idempotency_Key=other_key), request.body)
    other_schedule = _with(request, X_Schedule_Id="sch_01K0000000000000000000000A")
    assert "do not match" in _rejection(other_schedule, request.body)
    other_time = _with(request, X_Scheduled_For="2026-08-06T03:01:00Z")
    assert "do not match" in _rejection(other_time, request.body)


def test_a_wrong_secret_is_rejected() -> None:
    request = signed(secrets=("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",))
    assert "no v1 signature" in _rejection(dict(request.headers), request.body)


@pytest.mark.parametrize("offset_s", [-301, 301, 86_400])
def test_timestamps_beyond_five_minutes_are_rejected(offset_s: int) -> None:
    request = signed()
    message = _rejection(dict(request.headers), request.body, now_s=SIGNED_AT_S + offset_s)
    assert "300 s" in message


def test_timestamps_within_five_minutes_are_accepted() -> None:
    request = signed()
    for offset_s in (-300, 300):
        verify_delivery(
            dict(request.headers), request.body, secrets=[SECRET], now_s=SIGNED_AT_S + offset_s
        )


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"X_Signature": None, "webhook_signature": None}, "x-signature (or webhook-signature)"),
        ({"X_Schedule_Id": None}, "x-schedule-id is missing"),
        ({"X_Run_Id": None}, "x-run-id is missing"),
        ({"X_Attempt": "zero"}, "X-Attempt must be a whole number"),
        ({"X_Attempt": "0"}, "X-Attempt must be 1 or more"),
        ({"X_Signature_Timestamp": "-5"}, "X-Signature-Timestamp must be a whole number"),
        ({"X_Signature": "v1,é"}, "x-signature is not printable ASCII"),
        ({"X_Signature": "v1,\u0661\u0662"}, "x-signature is not printable ASCII"),
        ({"X_Signature": "v1,\udc80"}, "x-signature is not printable ASCII"),
        ({"X_Signature": "v1,abc\x00"}, "x-signature is not printable ASCII"),
        ({"X_Idempotency_Key": KEY.upper()}, "64 lowercase hex digits"),
        ({"X_Idempotency_Key": "é" * 64}, "not printable ASCII"),
        ({"X_Signature_Timestamp": "\u0661\u0662"}, "not printable ASCII"),
        ({"X_Signature_Timestamp": "9" * 40}, "X-Signature-Timestamp must be a whole number"),
        ({"X_Schedule_Id": "sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WU"}, "sch_ + 26 base32"),  # U
        ({"X_Schedule_Id": "sch_01jdq8y5z2m4x7k9p3r6t8v0wb"}, "sch_ + 26 base32"),
        ({"X_Schedule_Id": "run_01JDQ8Y5Z2M4X7K9P3R6T8V0WB"}, "sch_ + 26 base32"),
        ({"X_Scheduled_For": "2026-08-06T03:00:00+00:00"}, "YYYY-MM-DDTHH:MM:SSZ"),
        ({"X_Scheduled_For": "2026-08-06T03:00:00.000Z"}, "YYYY-MM-DDTHH:MM:SSZ"),
        ({"X_Scheduled_For": "2026-8-6T3:00:00Z"}, "YYYY-MM-DDTHH:MM:SSZ"),
        ({"X_Scheduled_For": "2026-02-30T03:00:00Z"}, "no such date"),
        ({"X_Scheduled_For": "0000-01-01T00:00:00Z"}, "no such date"),
        ({"X_Scheduled_For": "2026-08-06T03:00:00Z\u2028"}, "not printable ASCII"),
        ({"X_Run_Id": "run_tooshort"}, "run_ + 26 base32"),
    ],
)
def test_malformed_requests_say_what_is_wrong(changes: dict[str, str | None], says: str) -> None:
    request = signed()
    assert says in _rejection(_with(request, **changes), request.body)


def test_a_header_given_twice_is_rejected() -> None:
    request = signed()
    headers = [*request.headers, ("x-idempotency-key", "0" * 64)]
    with pytest.raises(VerificationError, match="more than once"):
        verify_delivery(headers, request.body, secrets=[SECRET], now_s=SIGNED_AT_S)


def test_a_receiver_needs_well_formed_secrets_and_hold() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Receiver(secrets=(), deduper=MemoryDeduper())
    with pytest.raises(SignatureError, match="whsec_"):
        Receiver(secrets=("not-a-secret",), deduper=MemoryDeduper())
    with pytest.raises(ValueError, match="hold_s"):
        Receiver(secrets=(SECRET,), deduper=MemoryDeduper(), hold_s=0)


# --- junk of every kind ------------------------------------------------------------------

_NAMES = (
    "X-Idempotency-Key",
    "X-Signature-Timestamp",
    "X-Signature",
    "X-Schedule-Id",
    "X-Scheduled-For",
    "X-Run-Id",
    "X-Attempt",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
)
_GOOD = dict(signed().headers)
_JUNK = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(codec="ascii"), max_size=80),
    st.sampled_from(["v1,é", "v1,", "v1", ",", " ", "v1,==", "9" * 30, "-1", "\x00", "é"]),
    st.builds(lambda s: "v1," + s, st.text(max_size=60)),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),  # how http.server decodes
)


@st.composite
def _mangled_headers(draw: st.DrawFn) -> dict[str, str]:
    """The genuine headers with some values replaced by junk and some dropped."""
    headers = dict(_GOOD)
    for name in draw(st.lists(st.sampled_from(_NAMES), unique=True, min_size=1)):
        if draw(st.booleans()):
            headers.pop(name, None)
        else:
            headers[name] = draw(_JUNK)
    return headers


@settings(max_examples=400, deadline=None)
@given(headers=_mangled_headers(), body=st.binary(max_size=64), skew_s=st.integers(-400, 400))
def test_junk_headers_raise_only_verification_error(
    headers: dict[str, str], body: bytes, skew_s: int
) -> None:
    receiver = Receiver(secrets=(SECRET,), deduper=MemoryDeduper())
    handled: list[VerifiedDelivery] = []
    try:
        receipt = receiver.receive(headers, body, now_s=SIGNED_AT_S + skew_s, handle=handled.append)
    except VerificationError:
        assert handled == []
    else:  # junk can only pass where it left every signed and checked value intact
        assert receipt.delivery.idempotency_key == KEY
        assert receipt.delivery.body == signed().body
