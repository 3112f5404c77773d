"""The downtime report with real processes: an appliance SIGKILLed while it delivers an
every-second schedule, down for three seconds, started again; then stopped cleanly and
started once more. Each restart (not the first start) records one ``appliance.restarted``
event, visible in the tenant's feed, says it in one log line, and ``steeple status``
shows the last one. The counts are checked against what the receiver saw."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.core.instants import parse_instant
from tests.e2e.harness import Appliance, Receiver, create_tenant, steeple

pytestmark = pytest.mark.slow
DOWN_S = 3.0
LIVENESS_S = 5.0  # the appliance's liveness mark interval (engine/liveness.py)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def restarts(api: httpx.Client, at_least: int, timeout: float = 60) -> list[dict[str, Any]]:
    """The ``appliance.restarted`` events once there are ``at_least`` (a condition with a
    deadline: the report waits for the planner to catch up)."""
    deadline = time.monotonic() + timeout
    while True:
        page = api.get("/v1/events", params={"type": "appliance.restarted"}).json()
        if len(page["items"]) >= at_least or time.monotonic() > deadline:
            return list(page["items"])
        time.sleep(0.1)


def test_every_restart_reports_its_downtime(tmp_path: Path, receiver: Receiver) -> None:
    tenant = create_tenant(tmp_path)
    first = Appliance(tmp_path).start()
    with first.client(tenant["api_key"]) as api:
        schedule = {
            "name": "tick",
            "cron": "* * * * * *",
            "target_url": receiver.url,
            "payload": {"n": 1},
            "catchup": {"policy": "all"},
        }
        assert api.post("/v1/schedules", json=schedule).status_code == 201
        receiver.wait_for(lambda ds: len(ds) >= 2)
        assert restarts(api, 0) == []  # a first start is no restart
    first.kill(signal.SIGKILL)
    before_kill = {d.scheduled_for for d in receiver.snapshot()}
    time.sleep(DOWN_S)  # the downtime under test, not a wait for something to happen

    second = Appliance(tmp_path).start()
    try:
        with second.client(tenant["api_key"]) as api:
            (event,) = restarts(api, 1)
        data = event["data"]
        assert event["tenant_id"] == "system" and data["clean_shutdown"] is False
        # From the last liveness mark (at most one interval before the kill) to the start.
        slack_ms = (LIVENESS_S + 30) * 1000  # the mark's interval, the new process's start
        assert DOWN_S * 1000 <= data["downtime_ms"] <= DOWN_S * 1000 + slack_ms
        assert data["missed"] == 0 and data["late"] == data["late_all"] >= DOWN_S - 1
        down_since = parse_instant(data["down_since"])
        restarted_at = down_since + data["downtime_ms"]
        receiver.wait_for(
            lambda ds: any(parse_instant(d.scheduled_for) >= restarted_at for d in ds)
        )
        # Occurrences of the downtime first delivered after the restart: the late ones,
        # plus any the dead process had claimed but not sent (reclaimed, not "late").
        after = {
            d.scheduled_for
            for d in receiver.snapshot()
            if down_since <= parse_instant(d.scheduled_for) < restarted_at
            and d.scheduled_for not in before_kill
        }
        assert data["late"] <= len(after) <= data["late"] + data["reclaimed"]
        line = next(line for line in second.log if "restarted after" in line)
        assert "after the process died: down" in line and f"{data['late']} occurrences" in line

        status = steeple("status", "--json", "--data-dir", str(tmp_path))
        shown = json.loads(status.stdout)
        assert shown["last_restart_late"] == data["late"]
        assert shown["last_restart_missed"] == 0 and shown["last_restart_clean"] is False
        assert shown["last_restart_downtime_seconds"] == data["downtime_ms"] / 1000
    finally:
        assert second.kill(signal.SIGTERM) == 0, "".join(second.log)

    third = Appliance(tmp_path).start()
    try:
        with third.client(tenant["api_key"]) as api:
            *_, clean = restarts(api, 2)
        assert clean["data"]["clean_shutdown"] is True and clean["data"]["reclaimed"] == 0
        assert clean["data"]["downtime_ms"] < 30_000
    finally:
        assert third.kill(signal.SIGTERM) == 0, "".join(third.log)
