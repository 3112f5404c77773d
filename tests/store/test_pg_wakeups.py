"""Wake-ups between replicas (store/infra/postgres/wakeups.py, storage.Announcing): a change
announced by one replica nudges another at once, through PostgreSQL."""

from __future__ import annotations

import trio

from appliance.store.infra.postgres.database import PgDatabase
from appliance.wiring.storage import Announcing, listen_to_replicas


async def test_a_change_announced_by_one_replica_nudges_the_other(pg_store_dsn: str) -> None:
    here, there = (
        PgDatabase.open(pg_store_dsn, pool_size=2),
        PgDatabase.open(pg_store_dsn, pool_size=2),
    )
    woken = trio.Event()
    local: list[str] = []
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(listen_to_replicas, there, woken.set)
            announcing = Announcing(here, lambda: local.append("nudged"))
            await nursery.start(announcing.run)
            with trio.fail_after(10):
                while not woken.is_set():  # the listener may still be connecting: announce again
                    announcing()
                    with trio.move_on_after(0.5):
                        await woken.wait()
            assert local  # the announcing replica nudged itself too
            nursery.cancel_scope.cancel()
    finally:
        here.close()
        there.close()
