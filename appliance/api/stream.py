"""``GET /v1/events/stream``: the event feed, live, as Server-Sent Events, for an API key.

The hub, the backfill-then-follow rule and the message format live in
:mod:`appliance.live.hub`, shared with the web UI's ``/events/stream``: one
function, two faces (rules there). While open, a stream asks again every few seconds
whether its key still authorises it (revoked? tenant suspended?) and ends when not.
Open streams are capped per key, per tenant and per
process (:mod:`appliance.live.limits`): over a cap, 429 naming the limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from quart import Response, request
from quart_trio import QuartTrio

from appliance.api.auth import authenticate_caller, checked_inputs, still_authorised
from appliance.api.context import context
from appliance.api.events import EventQuery, event_query
from appliance.live.hub import (
    HEARTBEAT_S,
    RETRY_MS,
    EventHub,
    Live,
    Recheck,
    StreamQuery,
    follow,
)
from appliance.live.limits import Holder, Surface, admit, holding
from appliance.store.infra.backend import Store

__all__ = ["HEARTBEAT_S", "RETRY_MS", "EventHub", "Live", "register"]


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/events/stream", view_func=stream_feed, methods=["GET"])


async def stream_feed() -> Response:
    resume = request.headers.get("Last-Event-ID")
    query = await checked_inputs(lambda: event_query(resume=resume))
    caller = await authenticate_caller()
    ctx = context()
    holder = Holder(
        surface=Surface.API,
        tenant_id=caller.tenant_id,
        credential=caller.key_id,
        actor=caller.actor,
    )
    await admit(ctx.streams, ctx.db, holder, now=ctx.clock.now_ms())
    recheck = Recheck(still_valid=still_authorised(), every_s=ctx.streams.recheck_s)
    messages = _messages(ctx.event_hub, ctx.db, caller.tenant_id, query, recheck)
    response = Response(
        holding(ctx.streams, holder, messages),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
    response.timeout = None  # a stream lives until the client leaves or we shut down
    return response


def _messages(
    hub: EventHub, db: Store, tenant_id: str, query: EventQuery, recheck: Recheck
) -> AsyncIterator[bytes]:
    return follow(
        hub,
        db,
        tenant_id,
        StreamQuery(after=query.after, types=query.types, schedule_id=query.schedule_id),
        recheck,
    )
