"""An online backup while the appliance delivers: each copy is consistent, passes
``integrity_check``, and holds every run acknowledged before it began; the restored copy
serves again."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest

from appliance.store.infra.snapshot import verify_copy
from tests.e2e.harness import Appliance, Receiver, create_tenant, steeple

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def succeeded(path: Path) -> set[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            str(r[0]) for r in conn.execute("SELECT id FROM job_runs WHERE state = 'succeeded'")
        }
    finally:
        conn.close()


def test_backup_while_delivering_then_restore(tmp_path: Path, receiver: Receiver) -> None:
    data = tmp_path / "data"
    tenant = create_tenant(data)
    app = Appliance(data).start()
    copies = []
    try:
        with app.client(tenant["api_key"]) as api:
            for n in range(3):
                made = api.post(
                    "/v1/schedules",
                    json={
                        "name": f"s{n}",
                        "cron": "* * * * * *",
                        "target_url": receiver.url,
                        "payload": {"n": n},
                    },
                )
                assert made.status_code == 201, made.text
        receiver.wait_for(lambda ds: len(ds) >= 6)
        for n in range(3):
            acknowledged = succeeded(data / "steeple.db")
            delivered_before = len(receiver.snapshot())
            done = steeple("backup", "--to", str(tmp_path / f"copy{n}.db"), "--data-dir", str(data))
            assert done.returncode == 0, done.stderr
            copy = tmp_path / f"copy{n}.db"
            assert verify_copy(copy) > 0  # integrity_check ok, a known schema
            assert acknowledged and acknowledged <= succeeded(copy)
            copies.append((copy, acknowledged))
            # The appliance kept delivering meanwhile (the backup blocks no writer).
            receiver.wait_for(lambda ds, b=delivered_before: len(ds) >= b + 3)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)

    last, acknowledged = copies[-1]
    done = steeple("restore", str(last), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "same X-Idempotency-Key" in done.stderr
    assert acknowledged <= succeeded(data / "steeple.db")
    assert any(p.name.startswith("steeple.db.before-restore") for p in data.iterdir())

    assert (data / "restored.json").exists()  # for the next start's downtime report
    count = len(receiver.snapshot())
    again = Appliance(data).start()
    try:
        receiver.wait_for(lambda ds: len(ds) >= count + 3)  # the restored copy serves
        with again.client(tenant["api_key"]) as api:
            restored = wait_for_restarts(api, 1)[0]["data"]
    finally:
        assert again.kill(signal.SIGTERM) == 0, "".join(again.log)
    # The report tells the truth: a restore, not a crash (the copy's process was running
    # when the copy was taken, so the copy itself holds no clean end).
    assert restored["restored_at"] is not None and restored["clean_shutdown"] is False
    assert "restarted from a copy restored at" in "".join(again.log)
    assert "after the process died" not in "".join(again.log)
    assert not (data / "restored.json").exists()  # reported once

    third = Appliance(data).start()  # after a clean stop: no restore any more
    try:
        with third.client(tenant["api_key"]) as api:
            latest = wait_for_restarts(api, 2)[0]["data"]
    finally:
        assert third.kill(signal.SIGTERM) == 0, "".join(third.log)
    assert latest["restored_at"] is None and latest["clean_shutdown"] is True
    assert "restarted after a clean stop" in "".join(third.log)


def wait_for_restarts(api: httpx.Client, at_least: int, timeout: float = 60) -> list[Any]:
    """The ``appliance.restarted`` events, newest first, once there are ``at_least`` (the
    report waits for the planner to catch up: a condition with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        page = api.get("/v1/events", params={"type": "appliance.restarted"}).json()
        if len(page["items"]) >= at_least:
            return sorted(page["items"], key=lambda e: e["seq"], reverse=True)
        assert time.monotonic() < deadline, page
        time.sleep(0.1)
