"""Tenants cannot starve each other: the attack found by the probe, replayed under virtual
time against the real planner, dispatcher and claim.

The attack: one tenant with 40 every-second schedules aimed at 5 slow endpoints (each
answers after 20 s) filled all 32 delivery slots; another tenant's every-second schedule
then ran 14 s late at the median, 28 s at worst.

The bound, from the design (store/claims.py, engine/dispatcher.py): the attacker never
holds more than its cap (16 of 32 slots), so at least 16 slots stay free for everyone
else — more than a claim batch (8). The dispatcher wakes at the earliest due run of a
tenant below its cap, and the claim gives that tenant its turn before the attacker's
backlog. So the victim's run is claimed and sent at its ``due_at``: its lateness is at
most one claim cycle, which under virtual time (the database runs inline) is zero.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import apsw
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.instants import parse_instant
from appliance.engine.delivery import Answer
from appliance.engine.dispatcher import DispatchConfig
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.engine.conftest import running_engine
from tests.engine.fake_exchange import Endpoint, Received, reply
from tests.store.conftest import T0, ScheduleRow, insert_schedule

EVERY_SECOND = "* * * * * *"
SLOW_HOSTS = [f"slow{n}.example" for n in range(5)]
SLOW_ANSWER_S = 20
CONCURRENCY = 32
TENANT_CAP = CONCURRENCY // 2  # what the appliance runs with by default (auto)
ATTACK_S = 90


class Receivers:
    """The victim's fast receiver and the attacker's slow ones: records the victim's
    lateness and the attacker's deliveries in flight."""

    def __init__(self, wall: TrioWallClock) -> None:
        self.wall = wall
        self.victim_lateness_ms: list[int] = []
        self.attacker_in_flight = 0
        self.attacker_peak = 0
        self.attacker_answered = 0

    async def respond(self, request: Received, n: int) -> Answer:
        if urlsplit(request.url).hostname not in SLOW_HOSTS:
            scheduled_for = parse_instant(request.headers["X-Scheduled-For"])
            self.victim_lateness_ms.append(self.wall.now_ms() - scheduled_for)
            return reply(200, b"ok")
        self.attacker_in_flight += 1
        self.attacker_peak = max(self.attacker_peak, self.attacker_in_flight)
        try:
            await trio.sleep(SLOW_ANSWER_S)
        finally:
            self.attacker_in_flight -= 1
        self.attacker_answered += 1
        return reply(200, b"finally")


def tenant_with_schedules(db: Database, name: str, urls: list[str]) -> str:
    tenant = db.write_now(create_tenant, name=name, now=T0).tenant_id
    for url in urls:
        row = ScheduleRow(cron=EVERY_SECOND, target_url=url, timeout_seconds=60)
        db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)
    return tenant


async def test_a_tenant_with_slow_receivers_cannot_starve_another(
    autojump_clock: MockClock, engine_db: Database, wall: TrioWallClock
) -> None:
    attacker_urls = [f"https://{SLOW_HOSTS[n % 5]}/hook/{n}" for n in range(40)]
    tenant_with_schedules(engine_db, "attacker", attacker_urls)
    tenant_with_schedules(engine_db, "victim", ["https://victim.example/hook"])
    receivers = Receivers(wall)
    config = DispatchConfig(concurrency=CONCURRENCY, tenant_cap=TENANT_CAP, user_agent="t")
    async with running_engine(
        engine_db, wall, Endpoint(respond=receivers.respond), dispatch=config
    ):
        await trio.sleep(ATTACK_S)

    lateness = sorted(receivers.victim_lateness_ms)
    assert len(lateness) >= ATTACK_S - 1  # every occurrence of the victim was delivered
    assert lateness[-1] == 0, lateness[-10:]  # on time, every one: not 14 s, not 28 s
    # The attacker is served too, up to its cap and never beyond it.
    assert receivers.attacker_peak == TENANT_CAP
    assert receivers.attacker_answered >= TENANT_CAP * (ATTACK_S // SLOW_ANSWER_S - 1)


async def test_a_tenant_held_by_its_cap_is_claimed_in_batches_not_one_by_one(
    autojump_clock: MockClock,
    engine_db: Database,
    wall: TrioWallClock,
    make_schedule: Callable[..., str],
) -> None:
    for _ in range(40):
        make_schedule(cron="0 3 * * *")  # all due at T0
    config = DispatchConfig(concurrency=16, tenant_cap=8, user_agent="t")  # claim batch: 4

    async def staggered(request: Received, n: int) -> Answer:
        await trio.sleep(1 + (n % 7) * 0.13)  # deliveries finish one at a time
        return reply(200)

    endpoint = Endpoint(respond=staggered)
    async with running_engine(engine_db, wall, endpoint, dispatch=config):
        await trio.sleep(30)
    assert len(endpoint.requests) == 40

    def claims(conn: apsw.Connection) -> list[int]:
        query = "SELECT COUNT(*) FROM attempts GROUP BY started_at ORDER BY started_at"
        return [count for (count,) in conn.execute(query)]

    sizes = engine_db.read_now(claims)
    # The first claim fills the cap; then a claim runs once a batch's worth of the
    # tenant's slots is free, never once per finished delivery.
    assert sizes[0] == 8 and sum(sizes) == 40
    assert min(sizes[:-1]) >= config.min_claim, sizes
