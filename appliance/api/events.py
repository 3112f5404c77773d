"""``GET /v1/events``: a tenant's event feed, read with a cursor.

- Events are ordered by ``seq``; ``?after=<seq>`` returns what came after it, so a client
  that keeps the last ``seq`` it saw misses nothing and sees nothing twice.
- ``next_cursor`` is always a number: the ``seq`` of the last event returned, or the
  request's ``after`` when there was none yet — poll with ``after=<next_cursor>``.
- A tenant sees its own events and the ``system`` tenant's (``clock.jump_detected``
  affects every tenant). Filters: ``type`` (repeatable) and ``schedule_id``.
- The live form of the same feed is ``GET /v1/events/stream`` (:mod:`appliance.api.stream`).
"""

from __future__ import annotations

from dataclasses import dataclass

from quart import Response, request
from quart_trio import QuartTrio

from appliance.api.auth import checked_inputs, read_as_tenant
from appliance.api.bodies import json_response
from appliance.api.pagination import read_limit
from appliance.core.envelope import render_event
from appliance.core.events import EventType, read_cursor
from appliance.errors import FieldError, ValidationError
from appliance.store.events import list_events


@dataclass(frozen=True, slots=True, kw_only=True)
class EventQuery:
    after: int
    limit: int
    types: frozenset[EventType] | None
    schedule_id: str | None


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/events", view_func=list_feed, methods=["GET"])


async def list_feed() -> Response:
    query = await checked_inputs(event_query)
    events = await read_as_tenant(
        lambda conn, tenant_id: list_events(
            conn,
            tenant_id=tenant_id,
            after=query.after,
            limit=query.limit,
            schedule_id=query.schedule_id,
            types=query.types,
        )
    )
    cursor = events[-1].seq if events else query.after
    return json_response({"items": [render_event(e) for e in events], "next_cursor": cursor})


def event_query(*, resume: str | None = None) -> EventQuery:
    """This request's filters. ``resume`` (the stream's ``Last-Event-ID``), when given,
    takes the place of ``?after=``. Raises ValidationError naming every bad parameter."""
    errors: list[FieldError] = []
    after = read_cursor(request.args.get("after"), errors)
    if resume is not None:
        after = read_cursor(resume, errors, field="Last-Event-ID")
    limit = read_limit(request.args.get("limit"), errors)
    types = _types(request.args.getlist("type"), errors)
    schedule_id = request.args.get("schedule_id") or None
    if errors:
        raise ValidationError(errors)
    return EventQuery(after=after, limit=limit, types=types, schedule_id=schedule_id)


def _types(texts: list[str], errors: list[FieldError]) -> frozenset[EventType] | None:
    known = {str(t) for t in EventType}
    unknown = [text for text in texts if text not in known]
    if unknown:
        errors.append(
            FieldError(
                field="type",
                message=f"unknown event type {unknown[0]!r}; one of {', '.join(sorted(known))}",
            )
        )
    return frozenset(EventType(t) for t in texts if t in known) or None
