"""The live cron preview of the schedule form: ``POST /schedules/preview`` answers an HTML
fragment with the next occurrences in the schedule's zone (with abbreviation) and in UTC,
rows after a UTC-offset change flagged, how the day fields combine, and the target URL's
verdict under the outbound policy's static rules — computed by the same functions the
API's ``/v1/cron/preview`` and the planner use (:mod:`appliance.core.cron_preview`).
"""

from __future__ import annotations

from typing import Final
from zoneinfo import available_timezones

import trio
from quart import Response, request

from appliance.core.addresses import check_target_url
from appliance.core.cron import MAX_EXPRESSION_CHARS, MAX_TIMEZONE_CHARS, day_rule, parse_cron
from appliance.core.cron_preview import PreviewItem, preview_occurrences
from appliance.core.schedules import ScheduleSpec
from appliance.core.timing_input import TimingInput
from appliance.errors import ValidationError
from appliance.store.users import Role
from appliance.ui.context import ui
from appliance.ui.render import page
from appliance.ui.security import require

COUNT: Final = 5
# The zone picker's suggestions: every IANA name this machine knows, plus UTC.
ZONES: Final = sorted((available_timezones() - {"localtime", "posixrules"}) | {"UTC"})


async def fragment() -> Response:
    require(Role.VIEWER)
    form = await request.form
    cron = form.get("cron", "")[:MAX_EXPRESSION_CHARS]
    timezone = (form.get("timezone", "").strip() or "UTC")[:MAX_TIMEZONE_CHARS]
    target_url = form.get("target_url", "")
    now = ui().clock.now_ms()
    try:
        items, rule = await trio.to_thread.run_sync(
            _compute, cron, timezone, now, limiter=ui().cpu, abandon_on_cancel=False
        )
        errors: list[str] = []
    except ValidationError as error:
        items, rule, errors = [], None, [f"{e.field}: {e.message}" for e in error.errors]
    return await page(
        "preview.html",
        items=items,
        rule=rule,
        errors=errors,
        timezone=timezone,
        target=_verdict(target_url),
    )


async def upcoming(spec: ScheduleSpec, *, count: int) -> list[PreviewItem]:
    """The next ``count`` occurrences of a stored schedule (no jitter), for its page."""
    now = ui().clock.now_ms()
    return await trio.to_thread.run_sync(
        preview_occurrences, spec, now, count, limiter=ui().cpu, abandon_on_cancel=False
    )


def _compute(cron: str, timezone: str, now: int) -> tuple[list[PreviewItem], str | None]:
    spec = parse_cron(cron, timezone)
    timing = TimingInput(
        cron=cron, timezone=timezone, at=None, every_seconds=None, start_at=None, end_at=None
    )
    return preview_occurrences(timing, now, COUNT), day_rule(spec)


def _verdict(url: str) -> str | None:
    """None when there is no URL to judge yet; else what the outbound policy says."""
    if not url.strip() or url.strip() in ("https://", "http://"):
        return None
    try:
        check_target_url(url.strip(), ui().policy)
    except ValidationError as error:
        return "; ".join(e.message for e in error.errors)
    return ""
