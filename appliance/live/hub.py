"""The event feed, live, as Server-Sent Events: one hub and one stream generator for both
faces, the API's ``GET /v1/events/stream`` (:mod:`appliance.api.stream`, API keys) and
the web UI's ``/events/stream`` (:mod:`appliance.ui.pages`, sessions).

Each event is one SSE message: ``id:`` its ``seq``, ``event:`` its type, ``data:`` the
envelope JSON of ``GET /v1/events``. Rules this module guards:

- **Nothing lost, nothing repeated.** A stream starts after ``Last-Event-ID`` (or
  ``?after=``): it first reads the stored feed from there (backfill), then follows the live
  hub, skipping anything at or below the last ``seq`` it sent. It subscribes *before* the
  backfill, once the hub knows its position, so every event is either stored before the
  backfill reads or fanned out to the subscription after it.
- **One reader for every stream.** :class:`EventHub` (a service of the runtime's root
  nursery) waits for commits (:meth:`Database.wait_for_commit`), reads what is new once,
  and hands each event to the subscriptions of its tenant (``system`` events to all). With
  no subscriber it reads nothing.
- **Bounded memory.** Each subscription buffers at most ``buffer`` events (the hub reads
  at most that many at a time); a client too slow to take them is dropped (its stream
  ends) and resumes by id. The hub never waits for a client, so a stalled client cannot
  hold up the others or the writer.
- **Heartbeat and shutdown.** A comment line every ``HEARTBEAT_S`` keeps proxies from
  closing an idle stream; :meth:`EventHub.close` (at shutdown) ends every stream cleanly.
- **The credential, asked again.** An open stream asks its :class:`Recheck` (the API's
  key, the UI's session; both fail for a suspended tenant) every ``every_s`` seconds,
  before it sends anything more, and ends at the first no: a revoked key, an ended
  session or a suspended tenant stops receiving within ``every_s``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

from appliance.core.envelope import render_event
from appliance.core.events import Event, EventType
from appliance.store.events import SYSTEM_TENANT, events_after, latest_seq, list_events
from appliance.store.infra.backend import Store

HEARTBEAT_S = 15
RETRY_MS = 1000  # what EventSource waits before it reconnects
BACKFILL_PAGE = 500
# Writes of other processes (the CLI) do not announce their commits here: look anyway.
MAX_WAIT_S = 1.0
# At most one fan-out per interval: under load every commit would otherwise cost each
# stream a chunk of its own (one write through the HTTP stack), and streams would cost the
# deliveries they report on. An event after a quiet spell still goes out at once.
FAN_OUT_INTERVAL_S = 0.25


@dataclass(frozen=True, slots=True)
class Message:
    """One event as every stream sends it, rendered once by the hub: its SSE bytes and the
    fields a stream filters on."""

    seq: int
    type: EventType
    schedule_id: str | None
    sse: bytes

    @classmethod
    def of(cls, event: Event) -> Message:
        return cls(seq=event.seq, type=event.type, schedule_id=event.schedule_id, sse=_sse(event))


@dataclass(frozen=True, slots=True)
class Batch:
    """A run of one tenant's new messages (its own and the system's, in ``seq`` order), with
    their bytes already joined: a stream with no filter writes ``sse`` as one chunk."""

    messages: tuple[Message, ...]
    sse: bytes

    @classmethod
    def of(cls, messages: list[Message]) -> Batch:
        return cls(messages=tuple(messages), sse=b"".join(m.sse for m in messages))


@dataclass(eq=False)
class Live:
    """One stream's subscription: batches of its tenant's new messages. It holds at most
    ``buffer`` messages; past that the hub drops it (the channel ends)."""

    tenant_id: str
    buffer: int
    send: trio.MemorySendChannel[Batch]
    receive_channel: trio.MemoryReceiveChannel[Batch]
    pending: int = 0  # messages sent and not yet received

    async def receive(self) -> Batch:
        """The next batch; raises ``trio.EndOfChannel`` once dropped or closed."""
        return self._taken(await self.receive_channel.receive())

    def receive_nowait(self) -> Batch:
        """The next batch already queued; raises ``trio.WouldBlock`` when none is."""
        return self._taken(self.receive_channel.receive_nowait())

    def _taken(self, batch: Batch) -> Batch:
        self.pending -= len(batch.messages)
        return batch


@dataclass(eq=False)
class EventHub:
    """Reads new events once, renders each once, and fans them out to every live stream."""

    db: Store
    buffer: int = 1024  # messages per subscription (≈ 0.5 MB at most)
    interval_s: float = FAN_OUT_INTERVAL_S
    dropped: int = 0  # subscriptions ended because their client fell behind
    _subscriptions: dict[str, set[Live]] = field(default_factory=dict)  # by tenant
    _position: int | None = None
    _positioned: trio.Event = field(default_factory=trio.Event)
    _wanted: trio.Event = field(default_factory=trio.Event)
    _closed: bool = False
    _fanned_out_at: float = float("-inf")
    _waiting: trio.CancelScope = field(default_factory=trio.CancelScope)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while not self._closed:
            if not self._subscriptions:
                await self._idle()
            elif self._position is None:
                self._position = await self.db.read(latest_seq)
                self._positioned.set()
            else:
                with trio.move_on_after(MAX_WAIT_S) as self._waiting:
                    await self.db.wait_for_commit()
                    await trio.sleep_until(self._fanned_out_at + self.interval_s)
                if not self._closed:
                    self._fanned_out_at = trio.current_time()
                    self._position = await self._fan_out(self._position)

    async def _idle(self) -> None:
        self._position = None
        self._positioned = trio.Event()
        self._wanted = trio.Event()
        await self._wanted.wait()

    async def _fan_out(self, position: int) -> int:
        """Hand every event after ``position`` to its subscriptions; the new position."""
        # A page never exceeds one buffer, and each read lets streams run: a client that
        # keeps up is never dropped for the size of a burst.
        page = self.buffer
        while batch := await self.db.read(events_after, after=position, limit=page):
            self._hand_out(batch)
            position = batch[-1].seq
            if len(batch) < page:
                break
        return position

    def _hand_out(self, events: list[Event]) -> None:
        """Render each event once and offer each subscribed tenant one batch of its own and
        the system's messages: the work per stream does not grow with the page."""
        messages = [Message.of(event) for event in events]
        tenants = {event.tenant_id for event in events}
        for tenant_id in list(self._subscriptions):
            if tenant_id not in tenants and SYSTEM_TENANT not in tenants:
                continue
            mine = [
                message
                for message, event in zip(messages, events, strict=True)
                if event.tenant_id in (tenant_id, SYSTEM_TENANT)
            ]
            if mine:
                batch = Batch.of(mine)
                for live in list(self._subscriptions.get(tenant_id, ())):
                    self._offer(live, batch)

    def _offer(self, live: Live, batch: Batch) -> None:
        if live.pending + len(batch.messages) > live.buffer:
            self.dropped += 1
            self._drop(live)
            return
        try:
            live.send.send_nowait(batch)
        except trio.BrokenResourceError:  # the stream went away meanwhile
            self._drop(live)
        else:
            live.pending += len(batch.messages)

    def _drop(self, live: Live) -> None:
        lives = self._subscriptions.get(live.tenant_id)
        if lives is not None:
            lives.discard(live)
            if not lives:
                del self._subscriptions[live.tenant_id]
        live.send.close()

    @asynccontextmanager
    async def subscribe(self, tenant_id: str) -> AsyncIterator[Live]:
        """This tenant's new messages, from the hub's position on; the subscription ends
        when the hub drops it or closes."""
        # Never more batches than messages, so the channel itself never blocks the hub.
        send, receive = trio.open_memory_channel[Batch](self.buffer)
        live = Live(tenant_id=tenant_id, buffer=self.buffer, send=send, receive_channel=receive)
        if self._closed:
            send.close()
        else:
            self._subscriptions.setdefault(tenant_id, set()).add(live)
            self._wanted.set()
        try:
            if not self._closed:
                await self._positioned.wait()
            yield live
        finally:
            self._drop(live)
            receive.close()

    def close(self) -> None:
        """End every stream and the hub (shutdown)."""
        self._closed = True
        for lives in list(self._subscriptions.values()):
            for live in list(lives):
                self._drop(live)
        self._positioned.set()
        self._wanted.set()
        self._waiting.cancel()

    @property
    def streams(self) -> int:
        return sum(len(lives) for lives in self._subscriptions.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamQuery:
    """Where a stream starts (the last ``seq`` the client has) and what it keeps."""

    after: int = 0
    types: frozenset[EventType] | None = None
    schedule_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Recheck:
    """Whether an open stream's credential still works: ``still_valid()``, asked at most
    ``every_s`` seconds (trio's clock) after the previous answer."""

    still_valid: Callable[[], Awaitable[bool]]
    every_s: float


async def follow(
    hub: EventHub, db: Store, tenant_id: str, query: StreamQuery, recheck: Recheck
) -> AsyncIterator[bytes]:
    """A tenant's stream: the stored feed after ``query.after``, then the live hub, each
    event once, a heartbeat comment when idle; ends when the hub drops or closes it, or
    when ``recheck`` says no."""
    yield f"retry: {RETRY_MS}\n\n".encode()
    last = query.after
    async with hub.subscribe(tenant_id) as live:
        while True:  # backfill: the stored feed after the client's last event
            page = await db.read(
                list_events,
                tenant_id=tenant_id,
                after=last,
                limit=BACKFILL_PAGE,
                schedule_id=query.schedule_id,
                types=query.types,
            )
            if page:
                yield b"".join(_sse(event) for event in page)
                last = page[-1].seq
            if len(page) < BACKFILL_PAGE:
                break
        async with contextlib.aclosing(_live(live, query, last, recheck)) as chunks:
            async for chunk in chunks:
                yield chunk


async def _live(
    live: Live, query: StreamQuery, last: int, recheck: Recheck
) -> AsyncGenerator[bytes, None]:
    """What arrives after ``last``, a heartbeat when idle, while ``recheck`` says yes."""
    unfiltered = query.types is None and query.schedule_id is None
    check_at = trio.current_time() + recheck.every_s
    sent_at = trio.current_time()
    while True:
        batches: list[Batch] = []
        with trio.move_on_at(min(sent_at + HEARTBEAT_S, check_at)):
            try:
                batches.append(await live.receive())
            except trio.EndOfChannel:
                return
            # Whatever else is queued goes out in the same chunk.
            with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
                while True:
                    batches.append(live.receive_nowait())
        if trio.current_time() >= check_at:
            if not await recheck.still_valid():
                return
            check_at = trio.current_time() + recheck.every_s
        if not batches:
            if trio.current_time() >= sent_at + HEARTBEAT_S:
                yield b": heartbeat\n\n"
                sent_at = trio.current_time()
            continue
        if unfiltered and batches[0].messages[0].seq > last:
            chunk = b"".join(batch.sse for batch in batches)
        else:
            chunk = b"".join(
                message.sse
                for batch in batches
                for message in batch.messages
                if message.seq > last and _wanted(message, query)
            )
        last = max(last, batches[-1].messages[-1].seq)
        if chunk:
            yield chunk
            sent_at = trio.current_time()


def _wanted(message: Message, query: StreamQuery) -> bool:
    if query.types is not None and message.type not in query.types:
        return False
    return query.schedule_id is None or message.schedule_id == query.schedule_id


def _sse(event: Event) -> bytes:
    """One SSE message: ``id:`` the ``seq``, ``event:`` the type, ``data:`` the envelope."""
    data = json.dumps(render_event(event), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n".encode()
