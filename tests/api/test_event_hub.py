"""The live stream's hub: one reader fans events out per tenant, each rendered once; a
client that does not keep up is dropped (bounded memory) without holding up the others."""

from __future__ import annotations

import contextlib
from functools import partial

import apsw
import pytest
import trio
import trio.testing

import appliance.live.hub
from appliance.api.events import EventQuery
from appliance.api.stream import HEARTBEAT_S, RETRY_MS, EventHub, Live, _messages
from appliance.core.envelope import render_event
from appliance.core.events import Event, EventType
from appliance.live.hub import Recheck
from appliance.store.events import SYSTEM_TENANT, append_event
from appliance.store.infra.database import Database

NOW = 1_790_000_000_000


async def _yes() -> bool:
    return True


STILL_VALID = Recheck(still_valid=_yes, every_s=5.0)  # a credential that keeps working


async def append(db: Database, tenant_id: str, count: int) -> list[int]:
    """``count`` events, one transaction each; their seqs."""
    return [
        await db.write(append_event, tenant_id=tenant_id, type=EventType.SCHEDULE_CREATED, now=NOW)
        for _ in range(count)
    ]


async def append_together(db: Database, tenant_id: str, count: int) -> list[int]:
    """``count`` events in one transaction; their seqs."""

    def write(conn: apsw.Connection) -> list[int]:
        return [
            append_event(conn, tenant_id=tenant_id, type=EventType.SCHEDULE_CREATED, now=NOW)
            for _ in range(count)
        ]

    return await db.write(write)


async def take(live: Live, count: int) -> list[int]:
    """The seqs of the next ``count`` messages."""
    seqs: list[int] = []
    while len(seqs) < count:
        seqs += [message.seq for message in (await live.receive()).messages]
    return seqs


async def drain(live: Live) -> list[int]:
    """The seqs of every message until the subscription ends."""
    seqs: list[int] = []
    while True:
        try:
            seqs += [message.seq for message in (await live.receive()).messages]
        except trio.EndOfChannel:
            return seqs


async def test_each_subscription_gets_its_tenants_and_the_systems_events_in_order(
    db: Database,
) -> None:
    hub = EventHub(db)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        async with hub.subscribe("ten_a") as a, hub.subscribe("ten_b") as b:
            of_a = await append(db, "ten_a", 2)
            of_b = await append(db, "ten_b", 1)
            of_system = await append(db, SYSTEM_TENANT, 1)
            got_a = await take(a, 3)
            got_b = await take(b, 2)
        assert got_a == of_a + of_system
        assert got_b == of_b + of_system
        hub.close()


async def test_a_client_that_falls_behind_is_dropped_and_the_others_get_everything(
    db: Database,
) -> None:
    hub = EventHub(db, buffer=4, interval_s=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        async with hub.subscribe("ten_a") as stalled, hub.subscribe("ten_a") as prompt:
            received: list[int] = []
            for _ in range(20):  # one at a time: each is handed out before the next is written
                await append(db, "ten_a", 1)
                received += await take(prompt, 1)
            kept = await drain(stalled)  # ends: the hub dropped it
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
            assert await drain(live) == []


UNFILTERED = EventQuery(after=0, limit=50, types=None, schedule_id=None)


def sent(chunks: list[bytes], seq: int) -> bool:
    return b"id: %d\n" % seq in b"".join(chunks)


async def read_stream(
    hub: EventHub,
    db: Database,
    *,
    marker: int,
    until: int,
    chunks: list[bytes],
    following: trio.Event,
) -> None:
    """Run one stream's message generator, keeping its chunks, until it sent ``until``;
    ``following`` is set once it sent ``marker`` (from then on it follows the hub)."""
    async with contextlib.aclosing(
        _messages(hub, db, "ten_a", UNFILTERED, STILL_VALID)
    ) as messages:
        async for chunk in messages:
            chunks.append(chunk)
            if sent(chunks, marker):
                following.set()
            if sent(chunks, until):
                return


async def test_each_event_is_rendered_once_whatever_the_number_of_streams(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered: list[int] = []

    def counting(event: Event) -> dict[str, object]:
        rendered.append(event.seq)
        return render_event(event)

    monkeypatch.setattr(appliance.live.hub, "render_event", counting)
    hub = EventHub(db)
    streams: list[tuple[list[bytes], trio.Event]] = [([], trio.Event()) for _ in range(5)]
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        (marker,) = await append(db, "ten_a", 1)
        async with trio.open_nursery() as readers:
            for chunks, following in streams:
                readers.start_soon(
                    partial(
                        read_stream,
                        hub,
                        db,
                        marker=marker,
                        until=marker + 3,
                        chunks=chunks,
                        following=following,
                    )
                )
            with trio.fail_after(10):
                for _, following in streams:
                    await following.wait()
            new = await append(db, "ten_a", 3)
        hub.close()
    assert [seq for seq in rendered if seq > marker] == new, "rendered once per event"
    for chunks, _ in streams:
        assert all(sent(chunks, seq) for seq in new)


async def test_what_is_queued_for_a_stream_goes_out_in_one_chunk(db: Database) -> None:
    hub = EventHub(db)
    chunks: list[bytes] = []
    following = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        (marker,) = await append(db, "ten_a", 1)
        async with trio.open_nursery() as readers:
            readers.start_soon(
                partial(
                    read_stream,
                    hub,
                    db,
                    marker=marker,
                    until=marker + 10,
                    chunks=chunks,
                    following=following,
                )
            )
            with trio.fail_after(10):
                await following.wait()
            seen = len(chunks)
            new = await append_together(db, "ten_a", 10)
        hub.close()
    (chunk,) = chunks[seen:]
    assert [int(line[4:]) for line in chunk.split(b"\n") if line.startswith(b"id: ")] == new


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


async def test_an_idle_stream_gets_a_heartbeat_comment_every_15_s(
    inline_db: Database, autojump_clock: trio.testing.MockClock
) -> None:
    hub = EventHub(inline_db)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        async with contextlib.aclosing(
            _messages(hub, inline_db, "ten_a", UNFILTERED, STILL_VALID)
        ) as stream:
            assert await anext(stream) == b"retry: %d\n\n" % RETRY_MS
            for _ in range(2):
                began = trio.current_time()
                assert await anext(stream) == b": heartbeat\n\n"
                assert HEARTBEAT_S <= trio.current_time() - began < HEARTBEAT_S + 1
            (seq,) = await append(inline_db, "ten_a", 1)
            assert (await anext(stream)).startswith(b"id: %d\n" % seq)
        hub.close()
