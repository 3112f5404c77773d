"""The real appliance as a subprocess: quick start, SIGKILL mid-delivery, lock, shutdown.

These prove ADR 0034 end to end: every occurrence delivered at least once across a crash,
all copies of one occurrence share the key, nothing double-materialised, the abandoned
attempt visible.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from appliance.core.ids import idempotency_key
from appliance.core.instants import format_scheduled_for, parse_instant
from appliance.core.signing import verify
from tests.e2e.harness import (
    Appliance,
    Delivery,
    Receiver,
    by_key,
    create_tenant,
    error_lines,
    iter_pages,
    steeple,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def every_second(receiver: Receiver, name: str = "tick") -> dict[str, object]:
    return {"name": name, "cron": "* * * * * *", "target_url": receiver.url, "payload": {"n": 1}}


def test_quick_start_delivers_signed_requests(tmp_path: Path, receiver: Receiver) -> None:
    tenant = create_tenant(tmp_path)
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            created = api.post("/v1/schedules", json=every_second(receiver))
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]
            receiver.wait_for(lambda ds: len(ds) >= 3)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    for d in receiver.deliveries[:3]:
        assert d.schedule_id == schedule_id
        assert d.key == idempotency_key(schedule_id, d.scheduled_for)
        # Canonical (ADR 0037): whole seconds, UTC, "Z", the one text the key is made of.
        scheduled_ms = parse_instant(d.scheduled_for)
        assert format_scheduled_for(scheduled_ms) == d.scheduled_for
        # No jitter: due at the occurrence, never signed (so never sent) before it.
        assert int(d.headers["x-signature-timestamp"]) >= scheduled_ms // 1000
        assert d.body == b'{"n":1}'
        verify(
            [tenant["signing_secret"]],
            d.key,
            int(d.headers["x-signature-timestamp"]),
            d.body,
            d.headers["x-signature"],
            now_s=int(time.time()),
        )
        assert d.headers["webhook-id"] == d.key
        assert d.headers["webhook-signature"] == d.headers["x-signature"]
        assert d.headers["user-agent"].startswith("Steeple/")
    # Every second from the first occurrence on, each once: claims go in due order, and
    # SIGTERM let the deliveries in flight finish.
    instants = sorted(parse_instant(d.scheduled_for) for d in receiver.deliveries)
    assert instants == list(range(instants[0], instants[-1] + 1, 1000))


def test_sigkill_mid_delivery_redelivers_with_the_same_key(
    tmp_path: Path, receiver: Receiver
) -> None:
    tenant = create_tenant(tmp_path)
    held: list[Delivery] = []

    def hold_first(d: Delivery) -> bool:
        if not held:
            held.append(d)
            return True
        return False

    receiver.hold = hold_first
    first = Appliance(tmp_path).start()
    with first.client(tenant["api_key"]) as api:
        schedule_id = api.post("/v1/schedules", json=every_second(receiver)).json()["id"]
        receiver.wait_for(lambda ds: len(ds) >= 1)  # the first delivery is now in flight
    first.kill(signal.SIGKILL)
    receiver.release()
    victim = held[0]

    second = Appliance(tmp_path).start()
    try:
        receiver.wait_for(lambda ds: any(d.key == victim.key and d.attempt > 1 for d in ds))
        receiver.wait_for(lambda ds: len({d.key for d in ds}) >= 4)
        with second.client(tenant["api_key"]) as api:
            api.post(f"/v1/schedules/{schedule_id}/pause").raise_for_status()
            runs = list(iter_pages(api, f"/v1/schedules/{schedule_id}/runs"))
            victim_run = api.get(f"/v1/runs/{victim.run_id}").json()
    finally:
        assert second.kill(signal.SIGTERM) == 0, "".join(second.log)

    # Nothing double-materialised: one run per occurrence, one id per key.
    instants = [r["scheduled_for"] for r in runs]
    assert len(instants) == len(set(instants))
    assert len({r["id"] for r in runs}) == len(runs)
    # All copies of one occurrence share its key, and the key is the contract's formula.
    for key, copies in by_key(receiver.deliveries).items():
        assert {(c.run_id, c.scheduled_for) for c in copies} == {
            (copies[0].run_id, copies[0].scheduled_for)
        }
        assert key == idempotency_key(schedule_id, copies[0].scheduled_for)
    # Every occurrence that succeeded was seen by the receiver.
    delivered = {d.scheduled_for for d in receiver.deliveries}
    assert {r["scheduled_for"] for r in runs if r["state"] == "succeeded"} <= delivered
    # The abandoned attempt is visible, then a successful one.
    outcomes = [a["outcome"] for a in victim_run["attempts"]]
    assert outcomes[0] == "abandoned" and outcomes[-1] == "ok", victim_run
    assert victim_run["state"] == "succeeded" and victim_run["idempotency_key"] == victim.key


def test_a_second_appliance_on_the_same_data_dir_refuses_to_start(tmp_path: Path) -> None:
    first = Appliance(tmp_path).start()
    try:
        second = steeple("serve", "--data-dir", str(tmp_path), "--listen", "127.0.0.1:0")
        assert second.returncode != 0
        assert "another Steeple appliance is running" in second.stderr
        assert len(error_lines(second.stderr)) == 1, second.stderr
    finally:
        first.kill(signal.SIGTERM)


def test_a_damaged_database_stops_the_appliance_with_one_clear_line(tmp_path: Path) -> None:
    """The check runs beside the services (a restart does not wait for it); damage found
    by it, or by whichever service reads the page first, stops the appliance like any
    store failure: non-zero exit, one line (tests/store has the check on its own)."""
    create_tenant(tmp_path)
    path = tmp_path / "steeple.db"
    conn = apsw.Connection(str(path))  # pages of event rows at the end of the file
    for n in range(500):
        conn.execute(
            "INSERT INTO events (id, tenant_id, type, occurred_at, data)"
            " SELECT 'evt_' || ?, id, 'tenant.created', ?, ? FROM tenants",
            (n, int(time.time() * 1000), "x" * 400),  # recent: the pruner leaves them
        )
    conn.close()  # the last connection: the WAL is checkpointed into the file
    pages = path.stat().st_size // 4096
    with path.open("r+b") as raw:  # a leaf page header: garbage
        raw.seek((pages - 20) * 4096)  # inside the events, away from its last leaf
        raw.write(b"\x0d" + b"\xff" * 7)
    done = steeple("serve", "--data-dir", str(tmp_path), "--listen", "127.0.0.1:0")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("steeple: error: ") and "corrupt" in last, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--listen", "nonsense"], "expected HOST:PORT"),
        (["serve", "--allow-target", "10.0.0.0/33"], "allow_target"),
        (["tenant", "create", "  "], "name"),
    ],
)
def test_cli_errors_are_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = steeple(*args, "--data-dir", str(tmp_path))
    assert done.returncode != 0
    assert message in done.stderr
    assert len(error_lines(done.stderr)) == 1, done.stderr


def test_version() -> None:
    done = steeple("--version")
    assert done.returncode == 0 and done.stdout.startswith("steeple ")
