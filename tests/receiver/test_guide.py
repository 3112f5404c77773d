"""docs/receiver.md stays true: its code blocks run, its two http.server receivers serve
real requests as the guide says, and it states what each deduper guarantees."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest

from appliance.core.delivery import DeliveryRequest
from appliance.receiver import Receiver, SqliteDeduper, VerifiedDelivery
from tests.receiver.guide import TEXT, guide_block, python_blocks, run_block
from tests.receiver.signed import KEY, SECRET, signed


def test_the_guide_states_the_contract_and_each_guarantee() -> None:
    assert (
        "You may receive a request more than once. Verify the signature, then deduplicate on\n"
        "`X-Idempotency-Key`." in TEXT
    )
    for header in ("X-Schedule-Id", "X-Run-Id", "X-Attempt", "X-Scheduled-For", "webhook-id"):
        assert f"`{header}`" in TEXT
    table = TEXT[TEXT.index("| way |") : TEXT.index("### Transactional")]
    rows = [line for line in table.splitlines() if line.startswith("| **")]
    assert [row.split("**")[1] for row in rows] == [
        "`SqliteDeduper.once`",
        "`Receiver.receive` + `SqliteDeduper`",
        "`Receiver.receive` + `MemoryDeduper`",
    ]
    assert "**exactly once**" in rows[0]
    assert "at least once" in rows[1] and "at least once" in rows[2]
    assert "never 2xx" in rows[1]


def test_the_transactional_pattern_comes_first() -> None:
    assert TEXT.index("### Transactional") < TEXT.index("### Two-phase")
    blocks = python_blocks()
    assert "deduper.once(" in blocks[1] and ".receive(" in blocks[2]


def test_the_guide_says_standardwebhooks_refuses_bodies_that_are_not_json() -> None:
    assert "`standardwebhooks`" in TEXT and "not JSON raises" in TEXT
    assert "**Any body verifies.**" in TEXT  # tests/receiver/test_verify.py proves it


@pytest.mark.parametrize("index", range(4))
def test_every_python_block_in_the_guide_runs(index: int) -> None:
    blocks = python_blocks()
    assert len(blocks) == 4
    run_block(blocks[index])


def test_the_guides_key_vector_is_the_contract_vector(vectors: dict[str, Any]) -> None:
    first = vectors["idempotency_keys"][0]
    assert first["schedule_id"] in TEXT
    assert first["idempotency_key"] in TEXT
    assert vectors["signatures"][1]["signature"] in TEXT


def test_the_plain_python_verifier_agrees_with_steeple(vectors: dict[str, Any]) -> None:
    verify_plain = guide_block("verify_steeple_request")["verify_steeple_request"]
    for case in vectors["signatures"]:
        headers = {
            "webhook-id": case["id"],
            "webhook-timestamp": case["timestamp"],
            "webhook-signature": case["signature"],
        }
        ts = int(case["timestamp"])
        for secret in case["secrets"]:
            assert verify_plain(headers, case["body"].encode(), [secret], ts) == case["id"]
    request = signed(attempt=5)
    lowered = {name.lower(): value for name, value in request.headers}
    assert verify_plain(lowered, request.body, [SECRET], 1785985210) == lowered["x-idempotency-key"]
    for body, now_s in ((b"tampered", 1785985210), (request.body, 1785985210 + 301)):
        with pytest.raises(ValueError):
            verify_plain(lowered, body, [SECRET], now_s)


# --- the two example servers, serving ------------------------------------------------------


def _post(port: int, request: DeliveryRequest) -> tuple[int, str, str | None]:
    with closing(HTTPConnection("127.0.0.1", port, timeout=30)) as connection:
        connection.request("POST", "/", body=request.body, headers=dict(request.headers))
        response = connection.getresponse()
        return response.status, response.read().decode(), response.getheader("Retry-After")


@contextmanager
def _serving(server: Any) -> Iterator[int]:
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        serving.join()
        server.server_close()


def test_the_transactional_example_commits_each_effect_once(tmp_path: Path) -> None:
    example = guide_block("record_rollup")
    record_rollup = example["record_rollup"]

    def fail_once(conn: Any, delivery: VerifiedDelivery) -> None:
        record_rollup(conn, delivery)  # written, then rolled back with the key
        example["record_rollup"] = record_rollup
        raise RuntimeError("downstream said no")

    example["record_rollup"] = fail_once
    now = int(time.time())  # the example checks freshness against the real clock
    with SqliteDeduper(tmp_path / "app.db") as deduper:
        deduper.connection.execute("CREATE TABLE rollups (scheduled_for TEXT, request BLOB)")
        receiver = Receiver(secrets=(SECRET,), deduper=deduper)
        held = deduper.claim(KEY, now_s=now, hold_s=60)  # a two-phase handling elsewhere
        with _serving(example["SteepleServer"](("127.0.0.1", 0), receiver, deduper)) as port:
            status, _, retry_after = _post(port, signed(attempt=1, signed_at_s=now))
            assert (status, retry_after) == (409, "60")
            deduper.release(held)
            assert _post(port, signed(attempt=2, signed_at_s=now))[:2] == (
                500,
                "failed, please retry",
            )
            assert _post(port, signed(attempt=3, signed_at_s=now))[:2] == (200, "done")
            assert _post(port, signed(attempt=4, signed_at_s=now))[:2] == (
                200,
                "duplicate, already done",
            )
            forged = signed(body=b'{"task":"forged"}', signed_at_s=now)
            status, text, _ = _post(
                port, DeliveryRequest(url="", headers=forged.headers, body=b"{}")
            )
            assert status == 401 and "signature" in text
        rows = deduper.connection.execute("SELECT request FROM rollups").fetchall()
    assert rows == [(signed().body,)]


def test_the_two_phase_example_refuses_a_retry_while_the_first_handling_runs(
    tmp_path: Path,
) -> None:
    """The first handler is slow; the retry is answered 409 with Retry-After, never 2xx;
    the first handler then fails (500), and the next retry runs the effect."""
    example = guide_block("run_job")
    entered, finish = threading.Event(), threading.Event()
    effects: list[int] = []

    def handle(delivery: VerifiedDelivery) -> None:
        if delivery.attempt == 1:
            entered.set()
            assert finish.wait(30)
            raise RuntimeError("downstream timed out")
        effects.append(delivery.attempt)

    now = int(time.time())
    answers: list[tuple[int, str, str | None]] = []
    with SqliteDeduper(tmp_path / "keys.db") as deduper:
        receiver = Receiver(secrets=(SECRET,), deduper=deduper, hold_s=120)
        with _serving(example["SteepleServer"](("127.0.0.1", 0), receiver, handle)) as port:
            first = threading.Thread(
                target=lambda: answers.append(_post(port, signed(attempt=1, signed_at_s=now)))
            )
            first.start()
            assert entered.wait(30)
            status, text, retry_after = _post(port, signed(attempt=2, signed_at_s=now))
            assert (status, text) == (409, "being handled, retry later")
            assert retry_after is not None and 0 < int(retry_after) <= 120
            finish.set()
            first.join(30)
            assert [a[:2] for a in answers] == [(500, "failed, please retry")]
            assert _post(port, signed(attempt=3, signed_at_s=now))[:2] == (200, "done")
            assert _post(port, signed(attempt=4, signed_at_s=now))[:2] == (
                200,
                "duplicate, already done",
            )
    assert effects == [3]


def test_the_guides_get_example_is_the_contract_vector(vectors: dict[str, Any]) -> None:
    """docs/receiver.md, "Verifying a GET or DELETE": its signature is the GET vector's,
    and its ways of verifying an empty body are the ones the tests prove."""
    (get,) = [case for case in vectors["requests"] if case["method"] == "GET"]
    signature = dict(get["headers"])["X-Signature"]
    assert get["body"] == "" and signature == vectors["signatures"][3]["signature"]
    section = TEXT.split("## Verifying a GET or DELETE")[1].split("\n## ")[0]
    assert signature in section and get["timestamp"] in section
    assert "json_parse=False" in section  # tests/e2e/test_http_methods.py verifies so
    assert '`key + "." + timestamp + "."`' in section
