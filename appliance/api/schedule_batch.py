"""``POST /v1/schedules/batch``: up to 1,000 schedules created in one request, all or none
(docs/architecture.md, "The API").

Rules this module guards:

- Each item is exactly a ``POST /v1/schedules`` body, validated by the same code
  (``core.schedule_batch.parse_batch`` → ``parse_schedule``), checked against the network
  by the same ``check_destination`` (once per distinct host: the verdict depends on the
  host alone once the URL's static rules passed), and written by the same store function
  (``store.schedules.create_schedules``, which a single create calls with one spec): a
  schedule created in a batch is indistinguishable from one created alone, ``schedule.
  created`` event included.
- All or nothing: any refused item refuses the batch and nothing is created. A 422 lists
  every problem of every item at once, each with the item's ``index``; the tenant's
  schedule limit counts the whole batch (409 ``schedule-limit``, as a single create's).
- One write transaction for the whole batch, rows and events each by one ``executemany``.
- ``Idempotency-Key`` works as for a single create: the batch's 201 is remembered with a
  hash of its JSON and replayed for the same key and body; another body is refused.
- The same scope as a single create (a write key). The request body may be larger than
  other requests' (:data:`MAX_BATCH_REQUEST_BYTES`, see ``api/app.py``).
- Parsing, the linter (once per distinct timing) and rendering the answer (a thousand
  schedules' next runs, with an occurrence cache of its own) run off the event loop, in
  ``ApiContext.cpu``'s worker thread: a batch never holds up deliveries for long.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from urllib.parse import urlsplit

import trio
from quart import Response
from quart_trio import QuartTrio

from appliance.api.auth import authenticate_caller
from appliance.api.bodies import read_json
from appliance.api.context import ApiContext, context
from appliance.api.idempotency import recalled, request_hash, request_key_header, stored_json
from appliance.api.rendering import render_schedules
from appliance.core.cursor import anchored
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.schedule_batch import at_index, batch_warnings, parse_batch
from appliance.core.schedules import Schedule, ScheduleSpec
from appliance.errors import FieldError, ValidationError
from appliance.store import request_keys
from appliance.store import schedules as store
from appliance.store.api_keys import Caller
from appliance.store.request_keys import StoredResponse

PATH = "/v1/schedules/batch"
# 1,000 schedules of a few hundred bytes each, with room for payloads; a bigger import is
# split into batches (a single create's limit is api/app.py's MAX_REQUEST_BYTES).
MAX_BATCH_REQUEST_BYTES = 8 * 1024 * 1024
_HOST_CHECKS_AT_ONCE = 8


def register(app: QuartTrio) -> None:
    app.add_url_rule(PATH, view_func=create_schedules, methods=["POST"])


async def create_schedules() -> Response:
    caller = await authenticate_caller()
    ctx = context()
    obj = await read_json()
    request_key = request_key_header()
    remembered = await recalled(ctx, tenant_id=caller.tenant_id, request_key=request_key, obj=obj)
    if remembered is not None:
        return stored_json(remembered, replayed=True)
    # Reading is CPU per item: a thousand would hold the event loop (and every delivery)
    # up (bench/HISTORY.md, "Creating schedules, second pass")
    read = functools.partial(parse_batch, obj, policy=ctx.policy)
    specs = await trio.to_thread.run_sync(read, limiter=ctx.cpu)
    await check_destinations(ctx, specs)
    response, created = await _create(ctx, caller, specs, obj, request_key)
    if created:
        ctx.nudge()
    return stored_json(response, replayed=not created)


async def check_destinations(
    ctx: ApiContext, specs: Sequence[ScheduleSpec], indexes: Sequence[int] | None = None
) -> None:
    """``check_destination`` once per distinct host; a refusal names every item with it,
    by its place in ``specs`` or, given ``indexes`` (one per spec), by its index there."""
    by_host: dict[str, list[int]] = {}
    url_of: dict[str, str] = {}
    for index, spec in zip(indexes or range(len(specs)), specs, strict=True):
        host = (urlsplit(spec.target_url).hostname or "").lower()
        by_host.setdefault(host, []).append(index)
        url_of.setdefault(host, spec.target_url)
    errors: list[FieldError] = []
    limiter = trio.CapacityLimiter(_HOST_CHECKS_AT_ONCE)

    async def check(url: str, indexes: list[int]) -> None:
        async with limiter:
            try:
                await ctx.check_destination(url)
            except ValidationError as error:
                for index in indexes:
                    errors.extend(at_index(index, error.errors))

    async with trio.open_nursery() as nursery:
        for host, found in by_host.items():
            nursery.start_soon(check, url_of[host], found)
    if errors:
        raise ValidationError(sorted(errors, key=lambda e: e.index or 0))


async def _create(
    ctx: ApiContext,
    caller: Caller,
    specs: list[ScheduleSpec],
    obj: object,
    request_key: str | None,
) -> tuple[StoredResponse, bool]:
    now = ctx.clock.now_ms()
    anchored_specs = [anchored(spec, now=now) for spec in specs]
    warnings = await trio.to_thread.run_sync(
        lambda: batch_warnings(anchored_specs, now=now), limiter=ctx.cpu
    )

    def render(created: list[Schedule]) -> StoredResponse:
        shared = OccurrenceCache()  # this call's own: it runs on a worker thread
        items = render_schedules(created, now=now, shared=shared)
        for document, found in zip(items, warnings, strict=True):
            document["warnings"] = found
        return StoredResponse(
            status=201, body=json.dumps({"items": items}, ensure_ascii=False, separators=(",", ":"))
        )

    if request_key is None:
        schedules = await ctx.db.write(
            store.create_schedules,
            tenant_id=caller.tenant_id,
            specs=specs,
            now=now,
            max_schedules=ctx.max_schedules,
            actor=caller.actor,
        )
        response = await trio.to_thread.run_sync(lambda: render(schedules), limiter=ctx.cpu)
        return response, True
    # Looked up again inside the write: two retries racing each other create one batch.
    return await ctx.db.write(
        request_keys.create_schedules_once,
        tenant_id=caller.tenant_id,
        specs=specs,
        request_key=request_key,
        request_hash=request_hash(obj),
        render=render,
        now=now,
        max_schedules=ctx.max_schedules,
        actor=caller.actor,
    )
