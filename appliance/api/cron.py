"""``POST /v1/cron/preview``: the next occurrences of a schedule's timing, of any kind.

The body takes a schedule's timing fields — exactly one of ``cron``, ``at`` and ``every``
(or ``every_seconds``), with ``timezone``, ``start_at`` and ``end_at`` — read by the very
function a create uses (``core.timing_input``), and answers exactly what such a schedule
would plan (``core.timing.occurrences``, with the DST rules of ADR 0037), with each
instant's local wall time and UTC offset so a tenant can see what a DST transition does,
and — when both day fields of a cron are given — in words whether a day must match both or
either (ADR 0037). A cron's occurrences carry what a DST transition did to them (the
schedule's ``dst`` policy, ADR 0043), and the answer carries the cron in words
(``core.cron_words``) and the linter's warnings (``core.schedule_warnings``, for which the
body may give ``jitter_seconds``). An interval without ``start_at`` is anchored at now's
second, as a create would anchor it. No jitter in the instants: that depends on a
schedule id. Needs a valid API key like every ``/v1`` route.

Rules this module guards:

- The body is read like a schedule's (``core.json_fields``): every problem at once, a 422
  naming each field, unknown fields refused, ``null`` meaning "absent" (the default).
- Every input is bounded before any work: ``cron`` at 200 characters, ``timezone`` at 64,
  ``count`` at 100, every instant inside the years whose local times and texts are
  ordinary (1970 up to 9999).
- The preview is worked out in a worker thread, one at a time (``ApiContext.cpu``): the
  parse of a long spec and the occurrences of a sparse one (29 February on a Sunday) are
  milliseconds of croniter (bench/HISTORY.md, "Costs once quoted in code comments"), which
  must not stall the event loop that serves every other request and runs the engine.
"""

from __future__ import annotations

import dataclasses

import trio
from quart import Response
from quart_trio import QuartTrio

from appliance.api.auth import authenticate
from appliance.api.bodies import json_response, read_json
from appliance.api.context import context
from appliance.core.cron import END_MS, day_rule
from appliance.core.cron_preview import preview_occurrences
from appliance.core.cron_words import describe_cron
from appliance.core.instants import format_instant, format_scheduled_for, parse_instant
from appliance.core.json_fields import FieldReader
from appliance.core.schedule_input import MAX_JITTER_SECONDS
from appliance.core.schedule_warnings import schedule_warnings, warning_documents
from appliance.core.timing import ScheduleKind, cron_spec, default_anchor, kind_of
from appliance.core.timing_input import TIMING_FIELDS, TimingInput, read_timing, timing_document
from appliance.errors import ValidationError

DEFAULT_COUNT = 5
MAX_COUNT = 100
_FIELDS = (*TIMING_FIELDS, "after", "count", "jitter_seconds")
_AFTER_RANGE = f"from {format_instant(0)} to before {format_instant(END_MS)}"


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/cron/preview", view_func=preview, methods=["POST"])


async def preview() -> Response:
    await authenticate(write=False)  # a preview changes nothing: read keys may call it
    obj = await read_json()
    ctx = context()
    now = ctx.clock.now_ms()
    document = await trio.to_thread.run_sync(
        _preview, obj, now, limiter=ctx.cpu, abandon_on_cancel=False
    )
    return json_response(document)


def _preview(obj: object, now: int) -> dict[str, object]:
    """The preview of the request body ``obj``; raises ValidationError. Runs in a worker
    thread: parsing a long spec and stepping a sparse one is CPU the loop must not spend."""
    timing, after, count, jitter = _parse(obj, now=now)
    items = [
        {
            "scheduled_for": format_scheduled_for(item.scheduled_for),
            "local_time": item.local_time,
            "utc_offset": item.utc_offset,
            "dst": None if item.dst is None else item.dst.value,
            "dst_note": item.dst_note,
        }
        for item in preview_occurrences(timing, after, count)
    ]
    kind = kind_of(timing)
    is_cron = kind is ScheduleKind.CRON
    warnings = schedule_warnings(timing, jitter_seconds=jitter, now=now)
    return {
        "kind": kind.value,
        **timing_document(timing),
        "description": describe_cron(timing.cron) if is_cron else None,
        "day_rule": day_rule(cron_spec(timing)) if is_cron else None,
        "warnings": warning_documents(warnings),
        "occurrences": items,
    }


def _parse(obj: object, *, now: int) -> tuple[TimingInput, int, int, int]:
    if not isinstance(obj, dict):
        raise ValidationError.single("$", "the request body must be a JSON object")
    fields = FieldReader(obj)
    fields.unknown(_FIELDS)
    timing = read_timing(fields)
    after = _after(fields, now)
    count = fields.integer(
        "count", default=DEFAULT_COUNT, low=1, high=MAX_COUNT, unit="occurrences"
    )
    jitter = fields.integer(
        "jitter_seconds", default=0, low=0, high=MAX_JITTER_SECONDS, unit="seconds"
    )
    if fields.errors:
        raise ValidationError(fields.errors)
    if timing.every_seconds is not None and timing.start_at is None:
        timing = dataclasses.replace(timing, start_at=default_anchor(now))
    return timing, after, count, jitter


def _after(fields: FieldReader, now: int) -> int:
    if fields.obj.get("after") is None:  # absent or null: from now
        return now
    text = fields.text("after", default=None, max_chars=64, example="2026-08-06T03:00:00Z")
    if not fields.ok("after"):
        return now
    try:
        after = parse_instant(text)
    except ValueError as error:
        fields.fail("after", str(error))
        return now
    if not 0 <= after < END_MS:
        fields.fail("after", f"must be {_AFTER_RANGE}")
        return now
    return after
