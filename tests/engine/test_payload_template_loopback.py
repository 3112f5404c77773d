"""A payload template end to end: planned, rendered once, and sent byte for byte the same
by every attempt of its run to a real loopback receiver (docs/schedules.md, "Payload
variables")."""

from __future__ import annotations

import json

from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.runs import RunState
from appliance.store.infra.database import Database
from tests.engine.loopback import response
from tests.engine.test_retry_policy_loopback import answers, create, deliver, the_run

TEMPLATE = {
    "for": "{{scheduled_for}}",
    "window": ["{{window_start}}", "{{window_end}}"],
    "note": 'previous "{{previous_scheduled_for}}" \\ {{run_id}}',
    "schedule": "{{schedule_id}}",
}


async def test_every_attempt_of_a_run_sends_the_same_rendered_bytes(
    autojump_clock: MockClock, engine_db: Database, wall: TrioWallClock, tenant: str
) -> None:
    error = response(b"boom", status="500 Internal Server Error")
    sid, server = await deliver(
        engine_db,
        wall,
        answers(error, response()),
        sid_of=lambda url: create(
            engine_db, tenant, url, {"backoff": [1]}, payload_template=TEMPLATE
        ),
    )
    run, attempts = the_run(engine_db, tenant, sid)
    assert run.state is RunState.SUCCEEDED
    assert [a.http_status for a in attempts] == [500, 200]
    first, second = server.bodies
    assert first == second  # byte for byte: rendered once, when the run was planned
    assert json.loads(first) == {
        "for": "2026-08-06T03:00:00Z",
        "window": ["2026-08-05T03:00:00Z", "2026-08-06T03:00:00Z"],
        "note": f'previous "2026-08-05T03:00:00Z" \\ {run.id}',
        "schedule": sid,
    }
