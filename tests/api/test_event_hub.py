"""The live stream's hub: one reader fans events out per tenant; a client that does not
keep up is dropped (bounded memory) without holding up the others."""

from __future__ import annotations

import trio
import trio.testing

from appliance.api.stream import EventHub
from appliance.core.events import EventType
from appliance.store.database import Database
from appliance.store.events import SYSTEM_TENANT, append_event

NOW = 1_790_000_000_000


async def append(db: Database, tenant_id: str, count: int) -> None:
    for _ in range(count):
        await db.write(append_event, tenant_id=tenant_id, type=EventType.SCHEDULE_CREATED, now=NOW)


async def test_each_subscription_gets_its_tenants_and_the_systems_events_in_order(
    db: Database,
) -> None:
    hub = EventHub(db)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        async with hub.subscribe("ten_a") as a, hub.subscribe("ten_b") as b:
            await append(db, "ten_a", 2)
            await append(db, "ten_b", 1)
            await append(db, SYSTEM_TENANT, 1)
            got_a = [(await a.receive()).tenant_id for _ in range(3)]
            got_b = [(await b.receive()).tenant_id for _ in range(2)]
        assert got_a == ["ten_a", "ten_a", SYSTEM_TENANT]
        assert got_b == ["ten_b", SYSTEM_TENANT]
        hub.close()


async def test_a_client_that_falls_behind_is_dropped_and_the_others_get_everything(
    db: Database,
) -> None:
    hub = EventHub(db, buffer=4)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        async with hub.subscribe("ten_a") as stalled, hub.subscribe("ten_a") as prompt:
            received: list[int] = []
            all_received = trio.Event()

            async def consume() -> None:
                async for event in prompt:
                    received.append(event.seq)
                    if len(received) == 20:
                        all_received.set()
                        return

            nursery.start_soon(consume)
            for _ in range(20):
                await append(db, "ten_a", 1)
                await trio.testing.wait_all_tasks_blocked()
            kept = [event.seq async for event in stalled]  # ends: the hub dropped it
            await all_received.wait()
        assert len(kept) == 4 and hub.dropped == 1
        assert received == list(range(received[0], received[0] + 20)), (received, hub.dropped)
        assert hub.streams == 0
        hub.close()


async def test_close_ends_every_subscription(db: Database) -> None:
    hub = EventHub(db)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        async with hub.subscribe("ten_a") as live:
            hub.close()
            assert [event async for event in live] == []
