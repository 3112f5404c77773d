"""``write_after_batched`` sees every ``write_batched`` write queued before it: the
dispatcher's claim counts the runs its completions finished
(docs/adr/0033-claim-queue-scheduling.md, "Claim"; appliance/store/infra/group_commit.py).
On SQLite threaded like production (group commit), and on PostgreSQL, which keeps the
same promise for the writes of its own process."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.store.conftest import T0


def _add_tenants(conn: Connection, names: Sequence[str]) -> list[str]:
    return [create_tenant(conn, name=name, now=T0).tenant_id for name in names]


def _count_tenants(conn: Connection) -> int:
    row = conn.execute("SELECT count(*) FROM tenants").fetchone()
    assert row is not None
    return int(row[0])


async def test_it_sees_a_batched_write_still_being_written(db: Store) -> None:
    """The batched write is in its transaction, not committed, when the ordered write is
    issued: it must wait for it (PostgreSQL), or ride in a later transaction (SQLite),
    never run beside it and miss it."""
    started, release = trio.Event(), threading.Event()
    seen: list[int] = []

    def held(conn: Connection, names: Sequence[str]) -> list[str]:
        added = _add_tenants(conn, names)
        trio.from_thread.run_sync(started.set)
        release.wait(10)
        return added

    async def count() -> None:
        seen.append(await db.write_after_batched(_count_tenants))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(db.write_batched, held, "first")
        await started.wait()
        nursery.start_soon(count)
        # Were the order not kept, the count's own thread would be done by now: it waits
        # on no lock (the batch inserts rows nobody else reads as locked).
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        release.set()
    assert seen == [1]


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    database = Database.open(tmp_path / "steeple.db")  # threaded: group commit
    yield database
    database.close()


async def test_in_one_group_it_runs_after_the_batches_whatever_the_arrival(
    sqlite_db: Database,
) -> None:
    """SQLite: queued before the batched writes of its own group commit, it still runs
    after them, in the same transaction."""
    db = sqlite_db
    started, release = trio.Event(), threading.Event()
    seen: list[int] = []

    def holding(conn: Connection) -> None:  # keeps the writer while the others queue
        trio.from_thread.run_sync(started.set)
        release.wait(10)

    async def count() -> None:
        seen.append(await db.write_after_batched(_count_tenants))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(db.write, holding)
        await started.wait()
        nursery.start_soon(count)
        await trio.testing.wait_all_tasks_blocked()
        for n in range(3):
            nursery.start_soon(db.write_batched, _add_tenants, f"t{n}")
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert db.group_commits == 2  # the holder's, then one for the count and the batch
    assert seen == [3]
