"""The tenant-side helper (appliance.receiver) and the receiver guide (docs/receiver.md):
the guide's code blocks are executed, and its http.server example serves real requests."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest

from appliance.core.delivery import DeliveryRequest, build_request
from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import parse_instant
from appliance.core.signing import SignatureError
from appliance.receiver import (
    Deduper,
    MemoryDeduper,
    Receiver,
    SqliteDeduper,
    VerificationError,
    VerifiedDelivery,
    verify_delivery,
)

GUIDE = Path(__file__).parents[1] / "docs" / "receiver.md"
SCHEDULE_ID = "sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB"
SCHEDULED_FOR = "2026-08-06T03:00:00Z"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _signed(
    *,
    body: bytes = b'{"task":"billing-rollup"}',
    secrets: tuple[str, ...] = (SECRET,),
    attempt: int = 1,
    signed_at_s: int = 1785985210,
) -> DeliveryRequest:
    return build_request(
        target_url="https://hooks.example.com/",
        body=body,
        content_type="application/json",
        tenant_headers=(),
        schedule_id=SCHEDULE_ID,
        run_id=run_id(SCHEDULE_ID, SCHEDULED_FOR),
        attempt=attempt,
        scheduled_for_ms=parse_instant(SCHEDULED_FOR),
        idempotency_key=idempotency_key(SCHEDULE_ID, SCHEDULED_FOR),
        secrets=secrets,
        signed_at_s=signed_at_s,
        user_agent="Steeple/test",
    )


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


def _contract_cases(vectors: dict[str, Any]) -> list[dict[str, Any]]:
    key = idempotency_key(SCHEDULE_ID, SCHEDULED_FOR)
    return [case for case in vectors["signatures"] if case["id"] == key]


def test_the_vectors_verify_with_every_listed_secret(vectors: dict[str, Any]) -> None:
    cases = _contract_cases(vectors)
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
    request = _signed(attempt=3)
    for transform in (str.lower, str.upper, str):
        headers = [(transform(name), value) for name, value in request.headers]
        delivery = verify_delivery(headers, request.body, secrets=[SECRET], now_s=1785985210)
        assert delivery.attempt == 3


def test_webhook_names_stand_in_for_absent_x_names() -> None:
    request = _signed()
    dropped = {"x-idempotency-key", "x-signature-timestamp", "x-signature"}
    headers = {name: value for name, value in request.headers if name.lower() not in dropped}
    delivery = verify_delivery(headers, request.body, secrets=[SECRET], now_s=1785985210)
    assert delivery.idempotency_key == idempotency_key(SCHEDULE_ID, SCHEDULED_FOR)


def _rejection(headers: dict[str, str], body: bytes, *, now_s: int = 1785985210) -> str:
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
    request = _signed()
    assert "signature" in _rejection(dict(request.headers), b'{"task":"drop-tables"}')
    other_key = idempotency_key(SCHEDULE_ID, "2026-08-06T03:01:00Z")
    assert "signature" in _rejection(_with(request, X_Idempotency_Key=other_key), request.body)
    other_schedule = _with(request, X_Schedule_Id="sch_01K0000000000000000000000A")
    assert "do not match" in _rejection(other_schedule, request.body)
    other_time = _with(request, X_Scheduled_For="2026-08-06T03:01:00Z")
    assert "do not match" in _rejection(other_time, request.body)


def test_a_wrong_secret_is_rejected() -> None:
    request = _signed(secrets=("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",))
    assert "no v1 signature" in _rejection(dict(request.headers), request.body)


@pytest.mark.parametrize("offset_s", [-301, 301, 86_400])
def test_timestamps_beyond_five_minutes_are_rejected(offset_s: int) -> None:
    request = _signed()
    message = _rejection(dict(request.headers), request.body, now_s=1785985210 + offset_s)
    assert "300 s" in message


def test_timestamps_within_five_minutes_are_accepted() -> None:
    request = _signed()
    for offset_s in (-300, 300):
        verify_delivery(
            dict(request.headers), request.body, secrets=[SECRET], now_s=1785985210 + offset_s
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
    ],
)
def test_malformed_requests_say_what_is_wrong(changes: dict[str, str | None], says: str) -> None:
    request = _signed()
    assert says in _rejection(_with(request, **changes), request.body)


def test_a_header_given_twice_is_rejected() -> None:
    request = _signed()
    headers = [*request.headers, ("x-idempotency-key", "0" * 64)]
    with pytest.raises(VerificationError, match="more than once"):
        verify_delivery(headers, request.body, secrets=[SECRET], now_s=1785985210)


def test_a_receiver_needs_well_formed_secrets() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Receiver(secrets=(), deduper=MemoryDeduper())
    with pytest.raises(SignatureError, match="whsec_"):
        Receiver(secrets=("not-a-secret",), deduper=MemoryDeduper())


# --- deduplication -----------------------------------------------------------------------


@contextmanager
def _memory(tmp_path: Path) -> Iterator[Deduper]:
    yield MemoryDeduper()


@contextmanager
def _sqlite(tmp_path: Path) -> Iterator[Deduper]:
    with SqliteDeduper(tmp_path / "deliveries.db") as deduper:
        yield deduper


DEDUPERS = [pytest.param(_memory, id="memory"), pytest.param(_sqlite, id="sqlite")]
DeduperFactory = Callable[[Path], Any]


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_deduper_contract(open_deduper: DeduperFactory, tmp_path: Path) -> None:
    with open_deduper(tmp_path) as deduper:
        assert deduper.first_seen("k1", now_s=1) is True
        assert deduper.first_seen("k1", now_s=2) is False
        assert deduper.first_seen("k2", now_s=2) is True
        deduper.forget("k1")
        deduper.forget("never-seen")
        assert deduper.first_seen("k1", now_s=3) is True


@pytest.mark.parametrize("open_deduper", DEDUPERS)
def test_receive_handles_each_key_once(open_deduper: DeduperFactory, tmp_path: Path) -> None:
    handled: list[VerifiedDelivery] = []
    with open_deduper(tmp_path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        for attempt in (1, 2, 3):
            request = _signed(attempt=attempt, signed_at_s=1785985210 + attempt)
            receipt = receiver.receive(
                request.headers, request.body, now_s=1785985210 + attempt, handle=handled.append
            )
            assert receipt.first_seen is (attempt == 1)
            assert receipt.delivery.attempt == attempt
    assert [d.attempt for d in handled] == [1]


def test_a_failed_handling_is_forgotten_so_the_retry_is_handled() -> None:
    receiver = Receiver(secrets=(SECRET,), deduper=MemoryDeduper())
    request = _signed()

    def fail(delivery: VerifiedDelivery) -> None:
        raise RuntimeError("database down")

    with pytest.raises(RuntimeError, match="database down"):
        receiver.receive(request.headers, request.body, now_s=1785985210, handle=fail)
    handled: list[VerifiedDelivery] = []
    receipt = receiver.receive(
        request.headers, request.body, now_s=1785985210, handle=handled.append
    )
    assert receipt.first_seen
    assert len(handled) == 1


def test_an_unverified_request_never_records_its_key() -> None:
    deduper = MemoryDeduper()
    receiver = Receiver(secrets=(SECRET,), deduper=deduper)
    request = _signed()
    with pytest.raises(VerificationError):
        receiver.receive(request.headers, b"forged", now_s=1785985210, handle=lambda d: None)
    assert len(deduper) == 0


def test_memory_deduper_is_bounded_and_evicts_the_oldest() -> None:
    deduper = MemoryDeduper(max_keys=2)
    for key in ("a", "b", "c"):
        assert deduper.first_seen(key, now_s=0)
    assert len(deduper) == 2
    assert deduper.first_seen("c", now_s=0) is False
    assert deduper.first_seen("a", now_s=0) is True  # evicted, so seen as new again


def test_sqlite_deduper_remembers_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.db"
    request = _signed()
    handled: list[VerifiedDelivery] = []
    with SqliteDeduper(path) as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        receiver.receive(request.headers, request.body, now_s=1785985210, handle=handled.append)
    with SqliteDeduper(path) as reopened:
        receiver = Receiver(secrets=(SECRET,), deduper=reopened)
        receipt = receiver.receive(
            request.headers, request.body, now_s=1785985210, handle=handled.append
        )
    assert receipt.first_seen is False
    assert len(handled) == 1


def test_sqlite_deduper_is_shared_by_two_connections_and_prunes(tmp_path: Path) -> None:
    path = tmp_path / "deliveries.db"
    with SqliteDeduper(path) as first, SqliteDeduper(path) as second:
        assert first.first_seen("old", now_s=100)
        assert second.first_seen("new", now_s=200)
        assert first.first_seen("new", now_s=201) is False
        assert second.prune(older_than_s=150) == 1
        assert first.first_seen("old", now_s=300) is True


# --- the guide ---------------------------------------------------------------------------


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def _run_block(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "receiver_guide"}
    exec(compile(source, str(GUIDE), "exec"), namespace)
    return namespace


def _guide_block(defining: str) -> dict[str, Any]:
    matches = [block for block in _python_blocks() if f"def {defining}(" in block]
    assert len(matches) == 1, f"the guide has one block defining {defining}"
    return _run_block(matches[0])


def test_the_guide_states_the_contract() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    assert (
        "You may receive a request more than once. Verify the signature, then deduplicate on\n"
        "`X-Idempotency-Key`." in text
    )
    for header in ("X-Schedule-Id", "X-Run-Id", "X-Attempt", "X-Scheduled-For", "webhook-id"):
        assert f"`{header}`" in text


@pytest.mark.parametrize("index", range(3))
def test_every_python_block_in_the_guide_runs(index: int) -> None:
    blocks = _python_blocks()
    assert len(blocks) == 3
    _run_block(blocks[index])


def test_the_guides_key_vector_is_the_contract_vector(vectors: dict[str, Any]) -> None:
    first = vectors["idempotency_keys"][0]
    text = GUIDE.read_text(encoding="utf-8")
    assert first["schedule_id"] in text
    assert first["idempotency_key"] in text
    assert vectors["signatures"][1]["signature"] in text


def test_the_plain_python_verifier_agrees_with_steeple(vectors: dict[str, Any]) -> None:
    verify_plain = _guide_block("verify_steeple_request")["verify_steeple_request"]
    for case in vectors["signatures"]:
        headers = {
            "webhook-id": case["id"],
            "webhook-timestamp": case["timestamp"],
            "webhook-signature": case["signature"],
        }
        ts = int(case["timestamp"])
        for secret in case["secrets"]:
            assert verify_plain(headers, case["body"].encode(), [secret], ts) == case["id"]
    request = _signed(attempt=5)
    lowered = {name.lower(): value for name, value in request.headers}
    assert verify_plain(lowered, request.body, [SECRET], 1785985210) == lowered["x-idempotency-key"]
    for body, now_s in ((b"tampered", 1785985210), (request.body, 1785985210 + 301)):
        with pytest.raises(ValueError):
            verify_plain(lowered, body, [SECRET], now_s)


def _post(port: int, request: DeliveryRequest) -> tuple[int, str]:
    with closing(HTTPConnection("127.0.0.1", port, timeout=10)) as connection:
        connection.request("POST", "/", body=request.body, headers=dict(request.headers))
        response = connection.getresponse()
        return response.status, response.read().decode()


def test_the_guides_http_server_example_serves_deliveries(tmp_path: Path) -> None:
    example = _guide_block("run_job")
    handled: list[VerifiedDelivery] = []
    outcomes = iter([RuntimeError("first try fails"), None])

    def handle(delivery: VerifiedDelivery) -> None:
        failure = next(outcomes)
        if failure is not None:
            raise failure
        handled.append(delivery)

    with SqliteDeduper(tmp_path / "deliveries.db") as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        server = example["SteepleServer"](("127.0.0.1", 0), receiver, handle)
        serving = threading.Thread(target=server.serve_forever)
        serving.start()
        try:
            port = server.server_address[1]
            now = int(time.time())  # the example checks freshness against the real clock
            assert _post(port, _signed(attempt=1, signed_at_s=now)) == (500, "failed, please retry")
            assert _post(port, _signed(attempt=2, signed_at_s=now)) == (200, "done")
            status, text = _post(port, _signed(attempt=3, signed_at_s=now))
            assert (status, text) == (200, "duplicate, already done")
            forged = _signed(body=b'{"task":"forged"}', signed_at_s=now)
            status, text = _post(port, DeliveryRequest(url="", headers=forged.headers, body=b"{}"))
            assert status == 401
            assert "signature" in text
        finally:
            server.shutdown()
            serving.join()
            server.server_close()
    assert [d.attempt for d in handled] == [2]
