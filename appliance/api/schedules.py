"""``/v1/schedules`` views: create, read, list, patch, delete, pause, resume, trigger
(creating many at once is :mod:`appliance.api.schedule_batch`).

Rules this module guards (docs/architecture.md, "The API"):

- Input is validated as a whole by ``core.schedule_input``; only a spec that passes is
  checked against the network (``check_destination`` resolves the target's host and
  applies the outbound policy), so a 422 lists every static problem at once.
- ``ETag: "<version>"`` on every schedule response; PATCH, DELETE, pause and resume honour
  ``If-Match`` (412 on mismatch). A PATCH is read → merge → compare-and-set on the version
  it merged against, so two concurrent patches never lose one; without ``If-Match`` a lost
  race is retried a few times before answering 409.
- A create with ``Idempotency-Key`` is remembered with a hash of its JSON (key order and
  whitespace do not matter): a retry replays the stored 201, another body is refused.
- A tenant holds at most ``max_schedules`` live schedules (the ``max_schedules_per_tenant``
  setting): a create beyond it answers 409 ``schedule-limit`` naming the limit.
- Every successful write calls ``nudge()`` so the planner and dispatcher see it at once.
- A ``read`` key sees the values of secret-bearing headers masked
  (:mod:`appliance.core.secret_headers`); a ``write`` key, which may change them, reads
  them back, and a patch that sends a mask back keeps the stored value.
- The answer to a create or an update carries ``warnings``: the linter's findings about
  the timing (``core.schedule_warnings``), never an error. They are worked out in a
  worker thread under ``ApiContext.cpu`` (bounded, but up to tens of ms for a sparse
  spec), before the write, so the writer is never held up by them.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable

import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.routing import BaseConverter

from appliance.api import backfill
from appliance.api.auth import (
    authenticate,
    authenticate_caller,
    checked_inputs,
    read_as_caller,
)
from appliance.api.bodies import JSON, MERGE_PATCH_JSON, json_response, read_json
from appliance.api.context import ApiContext, context
from appliance.api.idempotency import recalled, request_hash, request_key_header
from appliance.api.pagination import encode_cursor, page_request
from appliance.api.problems import Problem, bad_request
from appliance.api.rendering import render_run, render_schedule
from appliance.core.cursor import anchored
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.schedule_input import KEY_PATTERN, merge_patch, parse_schedule
from appliance.core.schedule_warnings import schedule_warnings, warning_documents
from appliance.core.schedules import Schedule, ScheduleSpec
from appliance.core.secret_headers import masked_headers
from appliance.errors import NotFound, ValidationError
from appliance.store import pauses, request_keys
from appliance.store import schedules as store
from appliance.store.api_keys import Caller, Scope
from appliance.store.request_keys import StoredResponse
from appliance.store.schedules import VersionMismatch, check_version
from appliance.store.usecases import manual

_PATCH_RETRIES = 3
# One entity tag, strong or weak (RFC 9110): the OpenAPI file's If-Match pattern.
_ENTITY_TAG = re.compile(r'(W/)?"[^"]*"')


class ScheduleIdConverter(BaseConverter):
    """A schedule id in a path: any segment but ``batch`` and ``apply``, which are the bulk
    create's and the apply's (``/v1/schedules/batch``, :mod:`appliance.api.schedule_batch`;
    :mod:`appliance.api.schedule_apply`), so those paths advertise only their own method in
    ``Allow``, not ``GET /v1/schedules/{schedule_id}``'s."""

    regex = r"(?!(?:batch|apply)$)[^/]+"


def register(app: QuartTrio) -> None:
    app.url_map.converters["schedule_id"] = ScheduleIdConverter
    app.add_url_rule("/v1/schedules", view_func=create_schedule, methods=["POST"])
    app.add_url_rule("/v1/schedules", view_func=list_schedules, methods=["GET"])
    item = "/v1/schedules/<schedule_id:schedule_id>"
    app.add_url_rule(item, view_func=get_schedule, methods=["GET"])
    app.add_url_rule(item, view_func=patch_schedule, methods=["PATCH"])
    app.add_url_rule(item, view_func=delete_schedule, methods=["DELETE"])
    app.add_url_rule(
        "/v1/schedules/<schedule_id>/pause", view_func=pause_schedule, methods=["POST"]
    )
    app.add_url_rule(
        "/v1/schedules/<schedule_id>/resume", view_func=resume_schedule, methods=["POST"]
    )
    app.add_url_rule(
        "/v1/schedules/<schedule_id>/trigger", view_func=trigger_schedule, methods=["POST"]
    )
    backfill.register(app)


async def create_schedule() -> Response:
    caller = await authenticate_caller()
    tenant_id = caller.tenant_id
    ctx = context()
    obj = await read_json()
    request_key = request_key_header()
    remembered = await recalled(ctx, tenant_id=tenant_id, request_key=request_key, obj=obj)
    if remembered is not None:
        return _stored(remembered, replayed=True)
    spec = parse_schedule(obj, policy=ctx.policy)
    await ctx.check_destination(spec.target_url)
    response, created = await _create(ctx, caller, spec, obj, request_key)
    if created:
        ctx.nudge()
    return _stored(response, replayed=not created)


async def _create(
    ctx: ApiContext, caller: Caller, spec: ScheduleSpec, obj: object, request_key: str | None
) -> tuple[StoredResponse, bool]:
    now = ctx.clock.now_ms()
    warnings = await _warnings(ctx, anchored(spec, now=now), now)

    def render(schedule: Schedule, shared: OccurrenceCache | None = None) -> StoredResponse:
        document = render_schedule(schedule, now=now, shared=shared)
        document["warnings"] = warnings
        return StoredResponse(status=201, body=json.dumps(document))

    if request_key is None:
        schedule = await ctx.db.write(
            store.create_schedule,
            tenant_id=caller.tenant_id,
            spec=spec,
            now=now,
            max_schedules=ctx.max_schedules,
            actor=caller.actor,
        )
        return render(schedule, ctx.upcoming), True  # on the loop: the app's cache
    # Looked up again inside the write: two retries racing each other create one schedule.
    return await ctx.db.write(
        request_keys.create_schedule_once,
        tenant_id=caller.tenant_id,
        spec=spec,
        request_key=request_key,
        request_hash=request_hash(obj),
        render=render,
        now=now,
        max_schedules=ctx.max_schedules,
        actor=caller.actor,
    )


def _stored(response: StoredResponse, *, replayed: bool) -> Response:
    document = json.loads(response.body)
    headers = {"Location": f"/v1/schedules/{document['id']}", "ETag": _etag(document["version"])}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return json_response(document, status=response.status, headers=headers)


async def list_schedules() -> Response:
    ctx = context()
    page, key = await checked_inputs(lambda: (page_request("sch"), _key_filter()))
    caller, schedules = await read_as_caller(
        lambda conn, tenant_id: store.list_schedules(
            conn, tenant_id=tenant_id, limit=page.limit + 1, after_id=page.position, key=key
        )
    )
    now = ctx.clock.now_ms()
    items = [
        _shown_to(caller, render_schedule(s, now=now, shared=ctx.upcoming))
        for s in schedules[: page.limit]
    ]
    more = len(schedules) > page.limit
    cursor = encode_cursor("sch", schedules[page.limit - 1].id) if more else None
    return json_response({"items": items, "next_cursor": cursor})


def _key_filter() -> str | None:
    """``?key=``: only the schedule with this key (exact match); ValidationError if no
    schedule could have it."""
    key = request.args.get("key")
    if key is not None and not KEY_PATTERN.fullmatch(key):
        raise ValidationError.single("key", f"{key!r} is not a key a schedule can have")
    return key


async def get_schedule(schedule_id: str) -> Response:
    caller, schedule = await read_as_caller(
        lambda conn, tenant_id: store.get_schedule(
            conn, tenant_id=tenant_id, schedule_id=schedule_id
        )
    )
    if schedule is None:
        raise NotFound(f"no schedule {schedule_id}")
    return _schedule_response(context(), schedule, caller=caller)


async def patch_schedule(schedule_id: str) -> Response:
    caller = await authenticate_caller()
    ctx = context()
    patch = await read_json(accept=(MERGE_PATCH_JSON, JSON))
    for _ in range(_PATCH_RETRIES):
        current = await _load(ctx, caller.tenant_id, schedule_id)
        # The patch is validated before If-Match is read: a request that is wrong
        # whatever the version answers 422, not 412 (retrying it could never succeed).
        spec = merge_patch(current.spec, patch, policy=ctx.policy)
        expected = _if_match()
        check_version(current, expected)
        now = ctx.clock.now_ms()
        warnings = await _warnings(ctx, anchored(spec, now=now), now)
        if spec == current.spec:  # nothing changes: no new version
            return _schedule_response(ctx, current, warnings=warnings)
        if spec.target_url != current.spec.target_url:
            await ctx.check_destination(spec.target_url)
        try:
            schedule = await _update(ctx, caller, current, spec)
        except VersionMismatch:
            if expected is not None:
                raise
            continue  # someone else changed it between our read and write: merge again
        ctx.nudge()
        return _schedule_response(ctx, schedule, warnings=warnings)
    raise Problem(
        status=409,
        kind="conflict",
        title="Conflict",
        detail="the schedule kept changing while this patch was applied; retry",
    )


async def _update(
    ctx: ApiContext, caller: Caller, current: Schedule, spec: ScheduleSpec
) -> Schedule:
    return await ctx.db.write(
        store.update_schedule,
        tenant_id=caller.tenant_id,
        schedule_id=current.id,
        spec=spec,
        now=ctx.clock.now_ms(),
        expected_version=current.version,
        actor=caller.actor,
    )


async def delete_schedule(schedule_id: str) -> Response:
    caller = await authenticate_caller()
    ctx = context()
    await ctx.db.write(
        store.delete_schedule,
        tenant_id=caller.tenant_id,
        schedule_id=schedule_id,
        now=ctx.clock.now_ms(),
        expected_version=_if_match(),
        actor=caller.actor,
    )
    ctx.nudge()
    return Response(b"", status=204)  # bytes: an empty iterable body needs asyncio


async def pause_schedule(schedule_id: str) -> Response:
    """Pause, with the optional ``{"note": …}`` body (an empty body is no note)."""
    caller = await authenticate_caller()
    sent = await request.get_data(cache=True, as_text=False, parse_form_data=False)
    note = pauses.parse_pause(await read_json() if sent else None)
    return await _change_schedule(
        functools.partial(pauses.pause_schedule, note=note), schedule_id, caller
    )


async def resume_schedule(schedule_id: str) -> Response:
    return await _change_schedule(pauses.resume_schedule, schedule_id)


async def _change_schedule(
    change: Callable[..., Schedule], schedule_id: str, caller: Caller | None = None
) -> Response:
    """Apply a store change (pause, resume) with If-Match, nudge the engine, answer it."""
    caller = caller or await authenticate_caller()
    ctx = context()
    schedule = await ctx.db.write(
        change,
        tenant_id=caller.tenant_id,
        schedule_id=schedule_id,
        now=ctx.clock.now_ms(),
        expected_version=_if_match(),
        actor=caller.actor,
    )
    ctx.nudge()
    return _schedule_response(ctx, schedule)


async def trigger_schedule(schedule_id: str) -> Response:
    """A manual run now: 201 with the new run, or 200 with the run already triggered in
    this same second (ADR 0037: a double-click is one occurrence)."""
    tenant_id = await authenticate()
    ctx = context()
    run, created = await ctx.db.write(
        manual.trigger_schedule,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        now=ctx.clock.now_ms(),
    )
    if created:
        ctx.nudge()
    return json_response(
        render_run(run),
        status=201 if created else 200,
        headers={"Location": f"/v1/runs/{run.id}"},
    )


async def _load(ctx: ApiContext, tenant_id: str, schedule_id: str) -> Schedule:
    schedule = await ctx.db.read(store.get_schedule, tenant_id=tenant_id, schedule_id=schedule_id)
    if schedule is None:
        raise NotFound(f"no schedule {schedule_id}")
    return schedule


def _schedule_response(
    ctx: ApiContext,
    schedule: Schedule,
    *,
    warnings: list[dict[str, str]] | None = None,
    caller: Caller | None = None,
) -> Response:
    """The schedule's document; ``caller``: the key of a read, whose scope decides whether
    secret-bearing header values are shown (a write's answer goes to a write key)."""
    document = render_schedule(schedule, now=ctx.clock.now_ms(), shared=ctx.upcoming)
    if caller is not None:
        document = _shown_to(caller, document)
    if warnings is not None:
        document["warnings"] = warnings
    return json_response(document, headers={"ETag": _etag(schedule.version)})


def _shown_to(caller: Caller, document: dict[str, object]) -> dict[str, object]:
    """``document`` as ``caller`` may see it: a read key gets secret header values masked."""
    if caller.scope is Scope.WRITE:
        return document
    headers = document["headers"]
    assert isinstance(headers, dict)
    return {**document, "headers": dict(masked_headers(list(headers.items())))}


async def _warnings(ctx: ApiContext, spec: ScheduleSpec, now: int) -> list[dict[str, str]]:
    """The linter's warnings about ``spec``'s timing (its interval anchored), as JSON."""
    lint = functools.partial(schedule_warnings, spec, jitter_seconds=spec.jitter_seconds, now=now)
    found = await trio.to_thread.run_sync(lint, limiter=ctx.cpu, abandon_on_cancel=False)
    return warning_documents(found)


def _etag(version: object) -> str:
    return f'"{version}"'


def _if_match() -> int | None:
    """The version ``If-Match`` demands, or None without the header or with ``*`` (any
    existing schedule). One ETag is accepted; a weak or unknown tag can never match
    (RFC 9110 strong comparison), so it answers 412."""
    header = request.headers.get("If-Match")
    if header is None or header.strip() == "*":
        return None
    tag = header.strip()
    if not _ENTITY_TAG.fullmatch(tag):
        raise bad_request('If-Match takes one entity tag (or *) as ETag gives it, e.g. "3"')
    inner = tag[1:-1]
    if not (inner.isascii() and inner.isdigit()):
        raise VersionMismatch(f"If-Match {header!r} names no version of this schedule")
    return int(inner)
