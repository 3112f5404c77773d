"""A resend with a new key through the real engine and delivery client, against a real
loopback receiver: the copy arrives under a different key, marked ``X-Steeple-Resend``
with the original's run id, signed like any delivery; the original is not sent again."""

from __future__ import annotations

from collections.abc import Callable

import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.ids import idempotency_key
from appliance.core.signing import verify
from appliance.engine.delivery import DeliveryClient
from appliance.store.active_secrets import active_secrets_of
from appliance.store.infra.database import Database
from appliance.store.runs import list_attempts, list_runs
from appliance.store.usecases.resend import resend_copy
from tests.engine.conftest import running_engine
from tests.engine.loopback import LOOPBACK_ALLOWED, keep_alive_server

DAILY_AT_T0 = "0 3 * * *"  # T0 is 03:00 UTC: one occurrence at the start


def headers_of(raw: bytes) -> dict[str, str]:
    head = raw.partition(b"\r\n\r\n")[0].decode("ascii").split("\r\n")[1:]
    return {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in head)}


async def test_the_receiver_gets_the_copy_marked_and_under_a_new_key(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
    tenant: str,
) -> None:
    async with keep_alive_server() as server:
        sid = make_schedule(cron=DAILY_AT_T0, target_url=server.url())
        async with DeliveryClient(LOOPBACK_ALLOWED) as client:
            async with running_engine(engine_db, wall, client) as engine:
                await trio.sleep(5)
                (original,) = engine_db.read_now(
                    list_runs, tenant_id=tenant, schedule_id=sid, limit=5
                )
                assert len(server.raw) == 1
                copy, created = engine_db.write_now(
                    resend_copy, tenant_id=tenant, run_id=original.id, now=wall.now_ms()
                )
                assert created
                engine.nudge()
                await trio.sleep(5)
    assert len(server.raw) == 2
    first, second = (headers_of(raw) for raw in server.raw)
    assert "x-steeple-resend" not in first
    assert second["x-steeple-resend"] == original.id
    assert first["x-idempotency-key"] == original.idempotency_key
    assert second["x-idempotency-key"] == copy.idempotency_key != original.idempotency_key
    assert second["x-run-id"] == copy.id
    assert second["x-idempotency-key"] == idempotency_key(sid, second["x-scheduled-for"])
    assert server.bodies[1] == server.bodies[0]
    secrets = engine_db.read_now(active_secrets_of, tenant_ids={tenant}, now=wall.now_ms())
    stamp = int(second["x-signature-timestamp"])
    verify(
        secrets[tenant], copy.idempotency_key, stamp, server.bodies[1], second["x-signature"],
        now_s=stamp,
    )  # fmt: skip
    (attempt,) = engine_db.read_now(list_attempts, run_id=copy.id)
    assert (attempt.http_status, attempt.signed_at) == (200, stamp)
    runs = engine_db.read_now(list_runs, tenant_id=tenant, schedule_id=sid, limit=5)
    assert {r.id: r.resend_of for r in runs} == {original.id: None, copy.id: original.id}
