"""A host name that passed the write-time check but resolves to a blocked address when a
run connects (DNS rebinding): the run fails ``destination_blocked`` and everything the
tenant can read about it — the attempt's error, the run in the API, its events — says
what the write-time check says, naming no address; the operator's log has the detail."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable

import pytest
import trio
from trio.testing import MockClock

from appliance.api.rendering import render_run_with_attempts
from appliance.clock import TrioWallClock
from appliance.core.runs import RunState
from appliance.engine.delivery import DeliveryClient
from appliance.engine.delivery.connect import refusal
from appliance.store.infra.database import Database
from appliance.store.runs import list_attempts, list_runs
from tests.engine.conftest import running_engine, stored_events
from tests.engine.loopback import OPEN, canned, fake_dns, receiver

DAILY_AT_T0 = "0 3 * * *"  # T0 is 03:00 UTC: one occurrence at the start of the test
ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b|::1\b|loopback")


async def test_a_name_rebound_to_loopback_is_refused_without_naming_the_address(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rebound = fake_dns({"hooks.rebind.example": ["127.0.0.1"]})
    async with receiver(canned("200 OK")) as rx:
        sid = make_schedule(cron=DAILY_AT_T0, target_url=rx.url("hooks.rebind.example"))
        with caplog.at_level(logging.WARNING):
            async with (
                DeliveryClient(OPEN, resolve=rebound) as client,
                running_engine(engine_db, wall, client),
            ):
                await trio.sleep(10)
        assert rx.requests == []

    (run,) = engine_db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=5)
    attempts = engine_db.read_now(list_attempts, run_id=run.id)
    assert run.state is RunState.FAILED and run.failure_reason == "destination_blocked"
    assert [a.error for a in attempts] == [refusal("hooks.rebind.example")]
    seen_by_tenant = json.dumps(
        [render_run_with_attempts(run, attempts)] + [wire for wire, _ in stored_events(engine_db)]
    )
    assert "hooks.rebind.example" in seen_by_tenant
    assert ADDRESS.search(seen_by_tenant) is None, seen_by_tenant
    # The operator's log names the host, the address and the range.
    (line,) = [r.getMessage() for r in caplog.records if "refused by the address" in r.message]
    assert "hooks.rebind.example resolves to 127.0.0.1, which is a loopback address" in line
