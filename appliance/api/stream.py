"""``GET /v1/events/stream``: the event feed, live, as Server-Sent Events.

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
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio
from quart import Response, request
from quart_trio import QuartTrio

from appliance.api.auth import authenticate, checked_inputs
from appliance.api.context import context
from appliance.api.events import EventQuery, event_query
from appliance.core.envelope import render_event
from appliance.core.events import Event
from appliance.store.database import Database
from appliance.store.events import SYSTEM_TENANT, events_after, latest_seq, list_events

HEARTBEAT_S = 15
RETRY_MS = 1000  # what EventSource waits before it reconnects
BACKFILL_PAGE = 500
# Writes of other processes (the CLI) do not announce their commits here: look anyway.
MAX_WAIT_S = 1.0


@dataclass(eq=False)
class _Subscription:
    tenant_id: str
    send: trio.MemorySendChannel[Event]
    receive: trio.MemoryReceiveChannel[Event]


@dataclass(eq=False)
class EventHub:
    """Reads new events once and fans them out to every live stream."""

    db: Database
    buffer: int = 1024  # events per subscription (≈ 0.5 MB at most)
    dropped: int = 0  # subscriptions ended because their client fell behind
    _subscriptions: set[_Subscription] = field(default_factory=set)
    _position: int | None = None
    _positioned: trio.Event = field(default_factory=trio.Event)
    _wanted: trio.Event = field(default_factory=trio.Event)
    _closed: bool = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while not self._closed:
            if not self._subscriptions:
                await self._idle()
            elif self._position is None:
                self._position = await self.db.read(latest_seq)
                self._positioned.set()
            else:
                with trio.move_on_after(MAX_WAIT_S):
                    await self.db.wait_for_commit()
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
            for event in batch:
                for subscription in list(self._subscriptions):
                    if event.tenant_id in (subscription.tenant_id, SYSTEM_TENANT):
                        self._offer(subscription, event)
            position = batch[-1].seq
            if len(batch) < page:
                break
        return position

    def _offer(self, subscription: _Subscription, event: Event) -> None:
        try:
            subscription.send.send_nowait(event)
        except trio.WouldBlock:
            self.dropped += 1
            self._drop(subscription)
        except trio.BrokenResourceError:  # the stream went away meanwhile
            self._drop(subscription)

    def _drop(self, subscription: _Subscription) -> None:
        self._subscriptions.discard(subscription)
        subscription.send.close()

    @asynccontextmanager
    async def subscribe(self, tenant_id: str) -> AsyncIterator[trio.MemoryReceiveChannel[Event]]:
        """A channel of this tenant's new events, from the hub's position on; it ends
        when the hub drops the subscription or closes."""
        send, receive = trio.open_memory_channel[Event](self.buffer)
        subscription = _Subscription(tenant_id=tenant_id, send=send, receive=receive)
        if self._closed:
            send.close()
        else:
            self._subscriptions.add(subscription)
            self._wanted.set()
        try:
            if not self._closed:
                await self._positioned.wait()
            yield receive
        finally:
            self._drop(subscription)
            receive.close()

    def close(self) -> None:
        """End every stream and the hub (shutdown)."""
        self._closed = True
        for subscription in list(self._subscriptions):
            self._drop(subscription)
        self._positioned.set()
        self._wanted.set()

    @property
    def streams(self) -> int:
        return len(self._subscriptions)


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/events/stream", view_func=stream_feed, methods=["GET"])


async def stream_feed() -> Response:
    resume = request.headers.get("Last-Event-ID")
    query = await checked_inputs(lambda: event_query(resume=resume))
    tenant_id = await authenticate()
    ctx = context()
    response = Response(
        _messages(ctx.event_hub, ctx.db, tenant_id, query),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
    response.timeout = None  # a stream lives until the client leaves or we shut down
    return response


async def _messages(
    hub: EventHub, db: Database, tenant_id: str, query: EventQuery
) -> AsyncIterator[bytes]:
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
            for event in page:
                yield _message(event)
                last = event.seq
            if len(page) < BACKFILL_PAGE:
                break
        while True:
            with trio.move_on_after(HEARTBEAT_S) as idle:
                try:
                    event = await live.receive()
                except trio.EndOfChannel:
                    return
            if idle.cancelled_caught:
                yield b": heartbeat\n\n"
            elif event.seq > last and _wanted(event, query):
                yield _message(event)
                last = event.seq


def _wanted(event: Event, query: EventQuery) -> bool:
    if query.types is not None and event.type not in query.types:
        return False
    return query.schedule_id is None or event.schedule_id == query.schedule_id


def _message(event: Event) -> bytes:
    data = json.dumps(render_event(event), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n".encode()
