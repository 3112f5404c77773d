"""``/`` (dashboard), ``/events`` (the feed, live), ``/events/stream`` (its Server-Sent
Events) and ``/guide`` (receiver snippets filled in with the tenant's own values).

The feed page shows the newest events, each actor by email (a web UI user) or name (an
API key; :mod:`appliance.store.actors`), its id in the cell's title and a copy button;
while it is open it counts what arrives after the newest shown and offers a "N new
events" link instead of moving rows under the reader. One tab per browser follows
``/events/stream`` — the API's stream function and hub (:mod:`appliance.live.hub`) behind
the session instead of a key; the others ask ``/events/new`` every five seconds
(``web/static/steeple.js``: HTTP/1.1 allows six connections per host, and each stream
holds one; the schedule and run pages share that stream, :mod:`appliance.ui.live_pages`).
Without JavaScript, reloading the page does the same. A stream counts toward
its session's, tenant's and the process's caps (:mod:`appliance.live.limits`); over one,
or with a cursor that is not an event ``seq``, it answers a problem document (429, 422)
instead of streaming.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Final

import trio
from quart import Blueprint, Response, redirect, request

from appliance.clock import WallClock
from appliance.core.cron_preview import soonest_each
from appliance.core.events import Actor, Event, EventType, read_cursor
from appliance.core.schedules import Schedule
from appliance.errors import FieldError, NotFound, ValidationError
from appliance.live.hub import Recheck, StreamQuery, follow
from appliance.live.limits import Holder, Surface, admit, holding
from appliance.store import overview
from appliance.store.actors import actor_names
from appliance.store.events import list_events
from appliance.store.figures.charts import dashboard_figures
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection
from appliance.store.sessions import find_session
from appliance.store.usecases.pages import dashboard as dashboard_of
from appliance.store.usecases.pages import schedule_names
from appliance.store.users import Role
from appliance.ui import charts
from appliance.ui.context import public_base_url, ui
from appliance.ui.render import page
from appliance.ui.security import COOKIE, current_session, require

FEED_SIZE: Final = 50
UPCOMING: Final = 10
ATTENTION: Final = 10


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/", view_func=dashboard, methods=["GET"])
    bp.add_url_rule("/events", view_func=events, methods=["GET"])
    bp.add_url_rule("/events/new", view_func=new_events, methods=["GET"])
    bp.add_url_rule("/events/stream", view_func=event_stream, methods=["GET"])
    bp.add_url_rule("/guide", view_func=guide, methods=["GET"])


async def dashboard() -> Response:
    session = current_session()
    if session is not None and session.user.tenant_id is None and session.user.operator:
        return redirect("/admin/tenants")  # type: ignore[return-value]
    _, tenant_id = require(Role.VIEWER)
    ctx = ui()
    now = ctx.clock.now_ms()

    shown = await ctx.db.read(
        dashboard_of, tenant_id=tenant_id, now=now, soonest=UPCOMING, attention=ATTENTION
    )
    upcoming = await trio.to_thread.run_sync(
        _next_up, shown.soonest, now, limiter=ctx.cpu, abandon_on_cancel=False
    )
    figures = await ctx.db.read(dashboard_figures, tenant_id=tenant_id, now=now)
    return await page(
        "dashboard.html",
        counts=shown.counts,
        upcoming=upcoming,
        attention=shown.attention,
        names=shown.schedule_names,
        charts=charts.dashboard_charts(figures),
    )


def _next_up(schedules: list[Schedule], now: int) -> list[tuple[Schedule, int]]:
    """The ``UPCOMING`` schedules that fire soonest, each once, by its next occurrence
    after now (docs/ui.md, "Pages"). The store picks them by planning cursor, which runs
    at most the planner's lookahead ahead of the next occurrence."""
    by_id = {s.id: s for s in schedules}
    timings = [(s.id, s.spec) for s in schedules]
    return [(by_id[key], ms) for key, ms in soonest_each(timings, now, UPCOMING)]


async def events() -> Response:
    _, tenant_id = require(Role.VIEWER)
    feed, names, schedules = await ui().db.read(_feed_with_names, tenant_id=tenant_id)
    newest = feed[-1].seq if feed else 0
    return await page(
        "events.html",
        events=list(reversed(feed)),
        names=names,
        schedule_names=schedules,
        newest=newest,
        live=ui().event_hub is not None,
        types=" ".join(EventType),
    )


def _feed_with_names(
    conn: Connection, *, tenant_id: str
) -> tuple[list[Event], dict[Actor, str], dict[str, str]]:
    """The newest events, their actors' names (emails, key names) and their schedules'
    names, one read."""
    feed = overview.recent_events(conn, tenant_id=tenant_id, limit=FEED_SIZE)
    actors = actor_names(conn, tenant_id=tenant_id, actors=(e.actor for e in feed))
    ids = (e.schedule_id for e in feed if e.schedule_id)
    return feed, actors, schedule_names(conn, tenant_id=tenant_id, schedule_ids=ids)


async def new_events() -> Response:
    """The poller fragment: how many events arrived after ``after``."""
    _, tenant_id = require(Role.VIEWER)
    errors: list[FieldError] = []
    after = read_cursor(request.args.get("after"), errors)
    if errors:
        raise ValidationError(errors)

    arrived = await ui().db.read(list_events, tenant_id=tenant_id, after=after, limit=FEED_SIZE + 1)
    return await page(
        "events_new.html", count=len(arrived), more=len(arrived) > FEED_SIZE, after=after
    )


async def event_stream() -> Response:
    """The tenant's feed after ``Last-Event-ID`` (or ``?after=``) as Server-Sent Events:
    the very generator ``GET /v1/events/stream`` answers with."""
    session, tenant_id = require(Role.VIEWER)
    ctx = ui()
    if ctx.event_hub is None:
        raise NotFound("no live feed here: reload /events")
    errors: list[FieldError] = []
    after = read_cursor(request.args.get("after"), errors)
    resume = request.headers.get("Last-Event-ID")
    if resume:  # what EventSource sends on reconnecting: it takes precedence
        after = read_cursor(resume, errors, field="Last-Event-ID")
    if errors:
        return invalid_stream(errors)
    holder = Holder(
        surface=Surface.UI,
        tenant_id=tenant_id,
        credential=session.id_hash,
        actor=Actor.user(session.user.id),
    )
    await admit(ctx.streams, ctx.db, holder, now=ctx.clock.now_ms())
    recheck = Recheck(
        still_valid=signed_in(request.cookies.get(COOKIE, ""), ctx.db, ctx.clock),
        every_s=ctx.streams.recheck_s,
    )
    chunks = follow(ctx.event_hub, ctx.db, tenant_id, StreamQuery(after=after), recheck)
    response = Response(
        holding(ctx.streams, holder, chunks),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
    response.timeout = None  # a stream lives until the tab leaves or the appliance stops
    return response


def invalid_stream(errors: list[FieldError]) -> Response:
    fields = ", ".join(error.field for error in errors)
    return stream_problem(
        status=422,
        kind="validation",
        title="The request is not valid",
        detail=f"{len(errors)} problem{'s' if len(errors) != 1 else ''} with: {fields}",
        errors=[{"field": error.field, "message": error.message} for error in errors],
    )


def stream_problem(
    *,
    status: int,
    kind: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **members: object,
) -> Response:
    """A refused stream's answer: an RFC 9457 problem document, as the API's stream
    answers (an EventSource reads no page; the tab polls instead)."""
    document = {
        "type": f"urn:steeple:problem:{kind}",
        "title": title,
        "status": status,
        "detail": detail,
        **members,
    }
    return Response(
        json.dumps(document, ensure_ascii=False),
        status=status,
        headers=headers or {},
        content_type="application/problem+json",
    )


def signed_in(token: str, db: Store, clock: WallClock) -> Callable[[], Awaitable[bool]]:
    """Whether the session of ``token`` still works, asked again later: a sign-out, an
    expiry or a suspended tenant ends an open stream too (store.event_hub.Recheck)."""

    async def ask() -> bool:
        return await db.read(find_session, token=token, now=clock.now_ms()) is not None

    return ask


async def guide() -> Response:
    _, tenant_id = require(Role.VIEWER)
    return await page("guide.html", tenant_id=tenant_id, base_url=public_base_url())
