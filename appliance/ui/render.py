"""Rendering helpers shared by the UI's views: the page wrapper and the Jinja filters
that print instants (always with their zone) and durations.

Templates are Jinja with autoescape on (Quart's default for ``.html``): every tenant
string — names, payloads, response excerpts, headers — is escaped; nothing is marked
safe.
"""

from __future__ import annotations

from typing import Final
from zoneinfo import ZoneInfo

from quart import Blueprint, Response, make_response, render_template, request

from appliance.core.cron_words import describe_timing
from appliance.core.instants import format_instant, to_datetime
from appliance.core.schedules import schedule_status
from appliance.core.timing import Timing
from appliance.errors import ValidationError
from appliance.store.figures.tenants import COUNT_CAP
from appliance.ui.context import ui
from appliance.ui.schedule_form import advanced_open
from appliance.ui.security import CSRF_FIELD, current_session

NOTICES: Final = {
    "created": "Schedule created.",
    "saved": "Schedule saved.",
    "paused": "Schedule paused.",
    "resumed": "Schedule resumed.",
    "triggered": "Run started: it is due now.",
    "triggered-all": "Runs started: they are due now.",
    "deleted": "Schedule deleted.",
    "replayed": "Run replayed with the same idempotency key.",
    "rotated": "Secret rotated.",
    "revoked": "Key revoked.",
    "ready": "Your password is set. Sign in.",
    "signed-out": "You are signed out.",
    "suspended": "Tenant suspended: its keys and users are refused, its schedules stopped.",
    "resumed-tenant": "Tenant resumed: its schedules catch up per their catch-up policy.",
}


async def page(template: str, *, status: int = 200, **values: object) -> Response:
    """A full page or fragment rendered with the session, its CSRF token and ``now``."""
    session = current_session()
    notice = NOTICES.get(request.args.get("done", ""))
    html = await render_template(
        template,
        user=None if session is None else session.user,
        csrf_token="" if session is None else session.csrf_token,
        csrf_field=CSRF_FIELD,
        now=ui().clock.now_ms(),
        notice=notice,
        **values,
    )
    response = await make_response(html, status)
    assert isinstance(response, Response)
    return response


def local(ms: int | None, zone: str = "UTC") -> str:
    """``2026-12-01 13:00:00 CET``: an instant in a zone, with the zone's abbreviation."""
    if ms is None:
        return "—"
    moment = to_datetime(ms).astimezone(ZoneInfo(zone))
    return f"{moment:%Y-%m-%d %H:%M:%S} {moment.tzname()}"


def relative(ms: int | None, now: int) -> str:
    """``in 3 min`` / ``5 h ago``."""
    if ms is None:
        return ""
    delta = (ms - now) // 1000
    size = abs(delta)
    for unit, seconds in (("d", 86_400), ("h", 3600), ("min", 60)):
        if size >= seconds:
            text = f"{size // seconds} {unit}"
            break
    else:
        text = f"{size} s"
    return f"in {text}" if delta >= 0 else f"{text} ago"


def countdown(ms: int, now: int) -> str:
    """Time left until ``ms``, to the second: ``23 h 59 min 5 s``, ``0 s`` once past
    (steeple.js ticks the same text down on ``[data-countdown]``)."""
    left = max(0, (ms - now) // 1000)
    days, left = divmod(left, 86_400)
    hours, left = divmod(left, 3600)
    minutes, seconds = divmod(left, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min")]
    shown = [f"{n} {unit}" for n, unit in parts if n] + [f"{seconds} s"]
    return " ".join(shown)


def duration(ms: int | None) -> str:
    """``0 s``, ``1.25 s``, ``3 min 5 s``; ``—`` when there is no figure."""
    if ms is None:
        return "—"
    if ms < 60_000:
        return f"{ms / 1000:g} s"
    minutes, seconds = divmod(ms // 1000, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {seconds} s"


def size(n: int) -> str:
    """Bytes in binary units: ``512 B``, ``3.4 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def capped(n: int) -> str:
    """A count that stops at ``COUNT_CAP``: ``10000+`` past it."""
    return f"{COUNT_CAP}+" if n > COUNT_CAP else str(n)


def in_words(timing: Timing) -> str:
    """A schedule's timing in plain English (core.cron_words), beside its raw text; a
    stored expression this version can no longer read is said so, never a 500."""
    try:
        return describe_timing(timing)
    except ValidationError:
        return "(no longer a valid expression)"


# Pages under no menu entry of their own, shown as part of the entry they belong to.
NAV_PARENTS: Final = {"/runs": "/schedules"}


def nav_current(href: str) -> bool:
    """Whether the menu entry ``href`` is the section of the page being shown (base.html
    marks it ``aria-current="page"``): ``/`` only on itself, others on their own path and
    every path under it (``/schedules/…`` is Schedules, a run page is too)."""
    path = request.path.rstrip("/") or "/"
    for under, parent in NAV_PARENTS.items():
        if path == under or path.startswith(under + "/"):
            path = parent
    if href == "/":
        return path == "/"
    return path == href or path.startswith(href + "/")


def plural(n: int, singular: str, many: str | None = None) -> str:
    """The noun for ``n`` of it: ``run`` for 1, ``runs`` otherwise (``many`` when the
    plural is not ``singular + "s"``). The one rule every count on a page uses."""
    return singular if n == 1 else many or f"{singular}s"


def counted(n: int, singular: str, many: str | None = None) -> str:
    """``1 failed run``, ``2 failed runs``: a count and its noun (:func:`plural`)."""
    return f"{n} {plural(n, singular, many)}"


def register_filters(blueprint: Blueprint) -> None:
    blueprint.add_app_template_global(nav_current, "nav_current")
    blueprint.add_app_template_global(advanced_open, "advanced_open")
    blueprint.add_app_template_filter(plural, "plural")
    blueprint.add_app_template_filter(counted, "counted")
    blueprint.add_app_template_filter(lambda s: str(schedule_status(s)), "status")
    blueprint.add_app_template_filter(capped, "capped")
    blueprint.add_app_template_filter(countdown, "countdown")
    blueprint.add_app_template_filter(in_words, "in_words")
    blueprint.add_app_template_filter(duration, "duration")
    blueprint.add_app_template_filter(size, "size")
    blueprint.add_app_template_filter(local, "local")
    blueprint.add_app_template_filter(relative, "relative")
    blueprint.add_app_template_filter(lambda ms: "—" if ms is None else format_instant(ms), "utc")
