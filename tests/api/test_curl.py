"""``GET /v1/runs/{id}/curl``: the command, run as its shell would run it (``shlex.split``
of the line, real ``curl``), reaches a real local receiver that verifies it with the
receiver helper; ``as_sent`` reproduces the attempt's signature headers."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from appliance.core.addresses import AddressPolicy
from appliance.core.runs import AttemptOutcome, Transition
from appliance.core.signing import sign
from appliance.receiver import VerificationError, verify_delivery
from appliance.store.active_secrets import active_secrets
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.api.conftest import START, Api, FakeClock
from tests.e2e.harness import Receiver

CURL = "/v1/runs/{}/curl"
pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs the curl program")


@pytest.fixture
def policy() -> AddressPolicy:
    """The receiver listens on loopback."""
    return AddressPolicy.parse(["127.0.0.0/8"])


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def secret_api(app: Any, db: Database) -> tuple[Api, str]:
    """A tenant, and its signing secret."""
    tenant = db.write_now(create_tenant, name="gamma", now=START)
    return Api(app=app, key=tenant.api_key, tenant_id=tenant.tenant_id), tenant.signing_secret


def deliver(db: Database, *, now: int, signed_at_s: int) -> None:
    """Claim the due runs and record one 200 attempt signed at ``signed_at_s``."""
    owner = db.write_now(register_incarnation, pid=1, now=now)
    batch = db.write_now(claim_runs, owner=owner, now=now, lease_ms=60_000, limit=10)
    done = Completion(
        outcome=AttemptOutcome.OK,
        transition=Transition.SUCCEED,
        due_at=None,
        failure_reason=None,
        http_status=200,
        error=None,
        latency_ms=3,
        response_excerpt="ok",
        signed_at=signed_at_s,
    )
    for run in batch.runs:
        assert db.write_now(complete_run, run=run, completion=done, now=now + 3)


async def run_command(line: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    return await trio.to_thread.run_sync(
        lambda: subprocess.run(argv, capture_output=True, text=True, timeout=30)
    )


async def test_the_command_reaches_the_receiver_and_verifies(
    secret_api: tuple[Api, str], receiver: Receiver
) -> None:
    api, secret = secret_api
    schedule = await api.create(
        target_url=receiver.url,
        payload={"it's": 'quoted "twice"', "$HOME": "`not run`"},
        headers={"Authorization": "Bearer hunter2", "X-Team": "it's billing"},
    )
    run = (await api.call("POST", f"/v1/schedules/{schedule['id']}/trigger")).body
    reply = await api.call("GET", CURL.format(run["id"]), query={"signed": "now"})
    assert reply.status == 200, reply.body
    answer = reply.body
    assert answer["argv"] == shlex.split(answer["command"])
    assert (answer["signed"], answer["attempt"], answer["masked"]) == ("now", 1, ["Authorization"])
    assert answer["signed_at"] == "2026-03-02T10:00:00Z"
    assert answer["valid_until"] == "2026-03-02T10:05:00Z"
    assert "hunter2" not in answer["command"]
    done = await run_command(answer["command"])
    assert done.returncode == 0, done.stderr
    (got,) = receiver.snapshot()
    signed_at = START // 1000
    verified = verify_delivery(got.headers, got.body, secrets=[secret], now_s=signed_at)
    assert (verified.idempotency_key, verified.run_id) == (run["idempotency_key"], run["id"])
    assert got.body == b'{"it\'s":"quoted \\"twice\\"","$HOME":"`not run`"}'
    assert got.headers["authorization"] == "<masked>"
    assert got.headers["x-team"] == "it's billing"
    # Signed now: valid for the receiver's tolerance, and only that long.
    with pytest.raises(VerificationError, match="more than 300 s"):
        verify_delivery(got.headers, got.body, secrets=[secret], now_s=signed_at + 301)


async def test_as_sent_reproduces_the_last_attempts_signature(
    secret_api: tuple[Api, str], db: Database, clock: FakeClock, receiver: Receiver
) -> None:
    api, secret = secret_api
    schedule = await api.create(target_url=receiver.url)
    run = (await api.call("POST", f"/v1/schedules/{schedule['id']}/trigger")).body
    never = await api.call("GET", CURL.format(run["id"]), query={"signed": "as_sent"})
    assert never.status == 409
    sent_at = START // 1000 + 1
    deliver(db, now=clock.now, signed_at_s=sent_at)
    clock.advance(3_600_000)  # an hour later, after a rotation
    rotated = await api.call(
        "POST", "/v1/signing-secrets/rotate", json_body={"overlap_seconds": 60}
    )
    assert rotated.status == 201, rotated.body
    body = b'{"report":"nightly","n":1}'
    as_sent = (await api.call("GET", CURL.format(run["id"]), query={"signed": "as_sent"})).body
    assert (as_sent["signed"], as_sent["attempt"]) == ("as_sent", 1)
    assert f"X-Signature-Timestamp: {sent_at}" in as_sent["argv"]
    assert (
        f"X-Signature: {sign([secret], run['idempotency_key'], sent_at, body)}" in as_sent["argv"]
    )
    now = (await api.call("GET", CURL.format(run["id"]))).body  # signed=now by default
    both = db.read_now(active_secrets, tenant_id=api.tenant_id, now=clock.now)
    assert len(both) == 2
    stamp = clock.now // 1000
    assert f"X-Signature: {sign(both, run['idempotency_key'], stamp, body)}" in now["argv"]
    done = await run_command(as_sent["command"])
    assert done.returncode == 0, done.stderr
    (got,) = receiver.snapshot()
    verify_delivery(got.headers, got.body, secrets=[secret], now_s=sent_at)


async def test_a_copy_carries_its_resend_mark(
    secret_api: tuple[Api, str], db: Database, clock: FakeClock
) -> None:
    api, _ = secret_api
    schedule = await api.create()
    run = (await api.call("POST", f"/v1/schedules/{schedule['id']}/trigger")).body
    deliver(db, now=clock.now, signed_at_s=START // 1000)
    clock.advance(2_000)
    copy = (await api.call("POST", f"/v1/runs/{run['id']}/resend", json_body={"key": "new"})).body
    argv = (await api.call("GET", CURL.format(copy["id"]))).body["argv"]
    assert f"X-Steeple-Resend: {run['id']}" in argv
    assert f"X-Idempotency-Key: {copy['idempotency_key']}" in argv


async def test_keys_scopes_tenants_and_bad_input(
    api: Api, other: Api, db: Database, clock: FakeClock
) -> None:
    schedule = await api.create()
    run = (await api.call("POST", f"/v1/schedules/{schedule['id']}/trigger")).body
    deliver(db, now=clock.now, signed_at_s=START // 1000)
    path = CURL.format(run["id"])
    assert (await other.call("GET", path)).status == 404
    assert (await other.call("GET", path, query={"signed": "as_sent"})).status == 404
    bad = await api.call("GET", path, query={"signed": "later"})
    assert (bad.status, bad.fields) == (422, ["signed"])
    reader = (await api.call("POST", "/v1/keys", json_body={"name": "r", "scope": "read"})).body
    read_only = Api(app=api.app, key=reader["api_key"])
    assert (await read_only.call("GET", path, query={"signed": "as_sent"})).status == 200
    assert (await read_only.call("GET", path, query={"signed": "now"})).status == 403
