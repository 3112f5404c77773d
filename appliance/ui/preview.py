"""The live preview of the schedule form: ``POST /schedules/preview`` answers an HTML
fragment for any kind of schedule (cron, one-off, interval, with its bounds and DST
policy): the next occurrences in the schedule's zone (with abbreviation) and in UTC, rows
after a UTC-offset change flagged and what a DST transition did to a cron's occurrence
(its note), a cron in words and how its day fields combine, the linter's warnings with
their codes, and the target URL's verdict under the outbound policy's static rules.

The form's fields become the document's timing exactly as a save builds them
(:func:`appliance.ui.schedule_form.timing_of`), read by the function a create uses
(``core.timing_input.read_timing``) and previewed by the functions the API's
``/v1/cron/preview`` uses (:mod:`appliance.core.cron_preview`,
:mod:`appliance.core.schedule_warnings`, :mod:`appliance.core.cron_words`); an interval
without "Start at" is anchored at now's second, as a create would anchor it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from zoneinfo import available_timezones

import trio
from quart import Response, request

from appliance.core.addresses import check_target_url
from appliance.core.cron import day_rule
from appliance.core.cron_preview import PreviewItem, preview_occurrences
from appliance.core.cron_words import describe_cron
from appliance.core.json_fields import FieldReader
from appliance.core.json_text import whole_number
from appliance.core.schedule_input import MAX_JITTER_SECONDS
from appliance.core.schedule_warnings import ScheduleWarning, schedule_warnings
from appliance.core.schedules import ScheduleSpec
from appliance.core.timing import ScheduleKind, cron_spec, default_anchor, kind_of
from appliance.core.timing_input import read_timing
from appliance.errors import FieldError, ValidationError
from appliance.store.users import Role
from appliance.ui.context import ui
from appliance.ui.render import page
from appliance.ui.schedule_form import form_error, timing_of
from appliance.ui.security import require

COUNT: Final = 5
# The zone picker's suggestions: every IANA name this machine knows, plus UTC.
ZONES: Final = sorted((available_timezones() - {"localtime", "posixrules"}) | {"UTC"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    kind: ScheduleKind
    timezone: str
    items: list[PreviewItem]
    description: str | None  # a cron in words
    rule: str | None  # how a cron's day fields combine, when both are given
    warnings: list[ScheduleWarning]


async def fragment() -> Response:
    require(Role.VIEWER)
    form = await request.form
    found, errors = await compute(form)
    return await page(
        "preview.html", preview=found, errors=errors, target=verdict(form.get("target_url", ""))
    )


async def compute(form: Mapping[str, str]) -> tuple[Preview | None, list[str]]:
    """The preview of the form's timing, or the problems that stop it (as the form names
    its fields)."""
    now = ui().clock.now_ms()
    try:
        found = await trio.to_thread.run_sync(
            _compute, dict(form), now, limiter=ui().cpu, abandon_on_cancel=False
        )
    except ValidationError as error:
        return None, [_said(e) for e in error.errors]
    return found, []


def _said(error: FieldError) -> str:
    name, message = form_error(error)
    return f"{name.replace('_', ' ')}: {message}"


async def upcoming(spec: ScheduleSpec, *, count: int) -> list[PreviewItem]:
    """The next ``count`` occurrences of a stored schedule (no jitter), for its page."""
    now = ui().clock.now_ms()
    return await trio.to_thread.run_sync(
        preview_occurrences, spec, now, count, limiter=ui().cpu, abandon_on_cancel=False
    )


def _compute(form: Mapping[str, str], now: int) -> Preview:
    """The preview of the form's timing; raises ValidationError naming each bad field.
    Runs in a worker thread: a long spec's parse is CPU the event loop must not spend
    (bench/HISTORY.md, "Creating schedules")."""
    form_errors: list[FieldError] = []
    document = timing_of(form, form_errors)
    jitter_text = form.get("jitter_seconds", "").strip()  # read as the API reads it
    jitter_given = whole_number(jitter_text)
    document["jitter_seconds"] = jitter_text or None if jitter_given is None else jitter_given
    fields = FieldReader(document)
    timing = read_timing(fields)
    jitter = fields.integer(
        "jitter_seconds", default=0, low=0, high=MAX_JITTER_SECONDS, unit="seconds"
    )
    faulted = {e.field for e in form_errors}
    problems = form_errors + [e for e in fields.errors if e.field not in faulted]
    if problems:
        raise ValidationError(problems)
    if timing.every_seconds is not None and timing.start_at is None:
        timing = dataclasses.replace(timing, start_at=default_anchor(now))
    kind = kind_of(timing)
    is_cron = kind is ScheduleKind.CRON
    return Preview(
        kind=kind,
        timezone=timing.timezone,
        items=preview_occurrences(timing, now, COUNT),
        description=describe_cron(timing.cron) if is_cron else None,
        rule=day_rule(cron_spec(timing)) if is_cron else None,
        warnings=schedule_warnings(timing, jitter_seconds=jitter, now=now),
    )


def verdict(url: str) -> str | None:
    """None when there is no URL to judge yet; else what the outbound policy says."""
    if not url.strip() or url.strip() in ("https://", "http://"):
        return None
    try:
        check_target_url(url.strip(), ui().policy)
    except ValidationError as error:
        return "; ".join(e.message for e in error.errors)
    return ""
