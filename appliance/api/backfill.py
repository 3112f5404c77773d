"""``POST /v1/schedules/{id}/backfill``: materialise a schedule's past occurrences that
have no run yet (docs/schedules.md, "Backfill"; the rules are
:mod:`appliance.store.usecases.backfill`'s).

The body is read like a schedule's (``core.json_fields``): every problem at once, unknown
fields refused, ``null`` meaning absent. ``from`` and ``to`` are RFC 3339 instants with an
offset (inclusive), ``max`` caps the occurrences the range may hold (default 1,000, at
most 10,000), and ``dry_run: true`` answers the count and the first and last instant
without writing anything. Runs are paced at ``replay_rate_per_second``, as a bulk replay.
"""

from __future__ import annotations

from quart import Response
from quart_trio import QuartTrio

from appliance.api.auth import authenticate_caller
from appliance.api.bodies import json_response, read_json
from appliance.api.context import context
from appliance.core.instants import format_scheduled_for
from appliance.core.json_fields import FieldReader
from appliance.core.timing_input import instant
from appliance.errors import ValidationError
from appliance.store.usecases.backfill import DEFAULT_MAX, MAX_MAX, Backfill, backfill

_FIELDS = ("from", "to", "max", "dry_run")


def register(app: QuartTrio) -> None:
    app.add_url_rule(
        "/v1/schedules/<schedule_id>/backfill", view_func=backfill_schedule, methods=["POST"]
    )


async def backfill_schedule(schedule_id: str) -> Response:
    caller = await authenticate_caller()
    ctx = context()
    obj = await read_json()
    if not isinstance(obj, dict):
        raise ValidationError.single("$", "the request body must be a JSON object")
    fields = FieldReader(obj)
    fields.unknown(_FIELDS)
    for key in ("from", "to"):
        if not fields.given(key):
            fields.fail(key, 'is required, e.g. "2026-11-30T00:00:00Z"')
    start, end = instant(fields, "from"), instant(fields, "to")
    limit = fields.integer("max", default=DEFAULT_MAX, low=1, high=MAX_MAX, unit="occurrences")
    dry_run = fields.boolean("dry_run", default=False)
    if fields.errors or start is None or end is None:
        raise ValidationError(fields.errors)
    result = await ctx.db.write(
        backfill,
        tenant_id=caller.tenant_id,
        schedule_id=schedule_id,
        start=start,
        end=end,
        limit=limit,
        dry_run=dry_run,
        now=ctx.clock.now_ms(),
        rate_per_second=ctx.replay_rate_per_second,
    )
    if result.materialised:
        ctx.nudge()
    return json_response(_render(result, dry_run=dry_run))


def _render(result: Backfill, *, dry_run: bool) -> dict[str, object]:
    def text(ms: int | None) -> str | None:
        return None if ms is None else format_scheduled_for(ms)

    return {
        "dry_run": dry_run,
        "occurrences": result.occurrences,
        "existing": result.existing,
        "missing": result.missing,
        "materialised": result.materialised,
        "first_scheduled_for": text(result.first),
        "last_scheduled_for": text(result.last),
    }
