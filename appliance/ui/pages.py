"""``/`` (dashboard), ``/events`` (the feed, live by polling a small fragment) and
``/guide`` (receiver snippets filled in with the tenant's own values).

The feed page shows the newest events and, while it is open, asks every few seconds
(htmx ``hx-trigger="every 5s"``, no inline script) how many arrived since the newest
shown; it offers a "N new events" link instead of moving rows under the reader. Without
JavaScript, reloading the page does the same.
"""

from __future__ import annotations

from typing import Final

import trio
from quart import Blueprint, Response, redirect, request

from appliance.core.cron_preview import soonest_occurrences
from appliance.core.events import Event
from appliance.core.schedules import Schedule
from appliance.store import overview
from appliance.store.database import Connection
from appliance.store.events import list_events
from appliance.store.runs import RunRecord
from appliance.store.users import Role
from appliance.ui.context import ui
from appliance.ui.render import page
from appliance.ui.security import current_session, require

FEED_SIZE: Final = 50
UPCOMING: Final = 10


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/", view_func=dashboard, methods=["GET"])
    bp.add_url_rule("/events", view_func=events, methods=["GET"])
    bp.add_url_rule("/events/new", view_func=new_events, methods=["GET"])
    bp.add_url_rule("/guide", view_func=guide, methods=["GET"])


async def dashboard() -> Response:
    session = current_session()
    if session is not None and session.user.tenant_id is None and session.user.operator:
        return redirect("/admin/tenants")  # type: ignore[return-value]
    _, tenant_id = require(Role.VIEWER)
    ctx = ui()
    now = ctx.clock.now_ms()

    def read(
        conn: Connection,
    ) -> tuple[overview.Counts, list[Schedule], list[RunRecord]]:
        return (
            overview.counts(conn, tenant_id=tenant_id, now=now),
            overview.next_due(conn, tenant_id=tenant_id, limit=UPCOMING),
            overview.attention(conn, tenant_id=tenant_id, now=now, limit=10),
        )

    counts, schedules, attention = await ctx.db.read(read)
    upcoming = await trio.to_thread.run_sync(
        _next_up, schedules, now, limiter=ctx.cpu, abandon_on_cancel=False
    )
    return await page("dashboard.html", counts=counts, upcoming=upcoming, attention=attention)


def _next_up(schedules: list[Schedule], now: int) -> list[tuple[Schedule, int]]:
    """The next occurrences across the schedules that fire soonest: any of the first
    ``UPCOMING`` occurrences belongs to one of the ``UPCOMING`` soonest schedules."""
    by_id = {s.id: s for s in schedules}
    timings = [(s.id, s.spec) for s in schedules]
    return [(by_id[key], ms) for key, ms in soonest_occurrences(timings, now, UPCOMING)]


async def events() -> Response:
    _, tenant_id = require(Role.VIEWER)
    feed = await ui().db.read(
        lambda conn: overview.recent_events(conn, tenant_id=tenant_id, limit=FEED_SIZE)
    )
    newest = feed[-1].seq if feed else 0
    return await page("events.html", events=list(reversed(feed)), newest=newest)


async def new_events() -> Response:
    """The poller fragment: how many events arrived after ``after``."""
    _, tenant_id = require(Role.VIEWER)
    text = request.args.get("after", "0")
    after = int(text) if text.isdigit() else 0

    def read(conn: Connection) -> list[Event]:
        return list_events(conn, tenant_id=tenant_id, after=after, limit=FEED_SIZE + 1)

    arrived = await ui().db.read(read)
    return await page(
        "events_new.html", count=len(arrived), more=len(arrived) > FEED_SIZE, after=after
    )


async def guide() -> Response:
    _, tenant_id = require(Role.VIEWER)
    return await page("guide.html", tenant_id=tenant_id, base_url=request.host_url.rstrip("/"))
