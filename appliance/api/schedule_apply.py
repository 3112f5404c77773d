"""``POST /v1/schedules/apply``: the tenant's keyed schedules made to match a desired set,
all or nothing, answered with the plan (docs/schedules-in-git.md, "Apply").

Rules this module guards:

- Each item is a ``POST /v1/schedules`` body with a ``key``, read by the same code
  (``core.schedule_apply.read_items`` → ``parse_schedule``), against the keyed schedules
  as a read finds them (a header sent back masked keeps its stored value). The plan
  (``core.schedule_apply.plan_apply``) is applied by ``store.usecases.apply`` in one write
  transaction, each step by the single operation's own store function, events included;
  if the keyed schedules changed between the read and the write, it reads again.
- The network check (``check_destinations``, once per host) runs for the items that
  create a schedule or change its target: an unchanged file never fails on DNS.
- ``dry_run`` answers the same plan and writes nothing. A 422 lists every problem of
  every item with its ``index``; an unchanged set writes nothing (no version, no event).
- The scope of a write (a write key, dry run or not: the plan shows the stored values a
  write key may read). ``Idempotency-Key`` works as for a batch: the answer of an apply is
  remembered with a hash of its JSON and replayed for the same key and body.
"""

from __future__ import annotations

import functools
import json
from typing import Final

import trio
from quart import Response
from quart_trio import QuartTrio

from appliance.api.auth import authenticate_caller
from appliance.api.bodies import json_response, read_json
from appliance.api.context import ApiContext, context
from appliance.api.idempotency import recalled, request_hash, request_key_header, stored_json
from appliance.api.problems import Problem
from appliance.api.schedule_batch import MAX_BATCH_REQUEST_BYTES, check_destinations
from appliance.core.cursor import anchored
from appliance.core.schedule_apply import (
    Action,
    ApplyRequest,
    Plan,
    Step,
    plan_apply,
    read_items,
    read_request,
)
from appliance.core.schedule_batch import batch_warnings
from appliance.core.schedules import ScheduleSpec
from appliance.store import request_keys
from appliance.store.api_keys import Caller
from appliance.store.infra.connection import Connection
from appliance.store.request_keys import StoredResponse
from appliance.store.schedules import VersionMismatch
from appliance.store.usecases.apply import apply_schedules, keyed_versions, live_schedules

PATH: Final = "/v1/schedules/apply"
MAX_APPLY_REQUEST_BYTES: Final = MAX_BATCH_REQUEST_BYTES
_RETRIES: Final = 3


def register(app: QuartTrio) -> None:
    app.add_url_rule(PATH, view_func=apply_view, methods=["POST"])


async def apply_view() -> Response:
    caller = await authenticate_caller()
    ctx = context()
    obj = await read_json()
    wanted = read_request(obj)
    request_key = None if wanted.dry_run else request_key_header()
    remembered = await recalled(ctx, tenant_id=caller.tenant_id, request_key=request_key, obj=obj)
    if remembered is not None:
        return stored_json(remembered, replayed=True)
    for _ in range(_RETRIES):
        try:
            return await _apply(ctx, caller, wanted, obj, request_key)
        except VersionMismatch:
            continue  # a keyed schedule changed between our read and our write: read again
    raise Problem(
        status=409,
        kind="conflict",
        title="Conflict",
        detail="the tenant's schedules kept changing while this apply was read; retry",
    )


async def _apply(
    ctx: ApiContext, caller: Caller, wanted: ApplyRequest, obj: object, request_key: str | None
) -> Response:
    current = await ctx.db.read(live_schedules, tenant_id=caller.tenant_id)
    stored = {s.spec.key: s for s in current if s.spec.key is not None}
    read = functools.partial(read_items, wanted.items, stored, policy=ctx.policy)
    specs = await trio.to_thread.run_sync(read, limiter=ctx.cpu)
    plan = plan_apply(specs, current, prune=wanted.prune)
    await _check_targets(ctx, plan)
    warnings = await _warnings(ctx, plan)
    unchanged = all(step.action is Action.UNCHANGED for step in plan.steps)
    if wanted.dry_run or (unchanged and request_key is None):
        # nothing to write (an unchanged set, applied in a loop, never takes the writer)
        return json_response(render_plan(plan, applied=not wanted.dry_run, warnings=warnings))
    response, applied = await ctx.db.write(
        _write,
        tenant_id=caller.tenant_id,
        specs=specs,
        wanted=wanted,
        seen=keyed_versions(current),
        warnings=warnings,
        request_key=request_key,
        request_hash=request_hash(obj),
        now=ctx.clock.now_ms(),
        max_schedules=ctx.max_schedules,
        caller=caller,
    )
    if applied and json.loads(response.body)["changed"]:
        ctx.nudge()
    return stored_json(response, replayed=not applied)


async def _warnings(ctx: ApiContext, plan: Plan) -> dict[int, list[dict[str, str]]]:
    """The linter's warnings (as a create answers them) of each item that creates a
    schedule or changes its timing, by item index; items without any are left out."""
    linted = [
        step
        for step in plan.steps
        if step.spec is not None and (step.action is Action.CREATE or step.timing_changed)
    ]
    now = ctx.clock.now_ms()
    specs = [anchored(step.spec, now=now) for step in linted if step.spec is not None]
    found = await trio.to_thread.run_sync(lambda: batch_warnings(specs, now=now), limiter=ctx.cpu)
    return {
        step.index: documents
        for step, documents in zip(linted, found, strict=True)
        if documents and step.index is not None
    }


async def _check_targets(ctx: ApiContext, plan: Plan) -> None:
    """The network check of each item that creates a schedule or changes its target."""
    checked: list[tuple[int, ScheduleSpec]] = []
    for step in plan.steps:
        moved = any(change.field == "target_url" for change in step.changes)
        wanted = step.action is Action.CREATE or moved
        if wanted and step.spec is not None and step.index is not None:
            checked.append((step.index, step.spec))
    if checked:
        await check_destinations(ctx, [s for _, s in checked], [i for i, _ in checked])


def _write(
    conn: Connection,
    *,
    tenant_id: str,
    specs: list[ScheduleSpec],
    wanted: ApplyRequest,
    seen: dict[str, int],
    warnings: dict[int, list[dict[str, str]]],
    request_key: str | None,
    request_hash: str,
    now: int,
    max_schedules: int | None,
    caller: Caller,
) -> tuple[StoredResponse, bool]:
    """The apply and its answer, in one write transaction; under an ``Idempotency-Key``
    the answer is remembered with it (``request_keys.create_once``)."""

    def apply(conn: Connection) -> StoredResponse:
        plan = apply_schedules(
            conn, tenant_id=tenant_id, specs=specs, prune=wanted.prune, seen=seen, now=now,
            max_schedules=max_schedules, actor=caller.actor,
        )  # fmt: skip
        document = render_plan(plan, applied=True, warnings=warnings)
        return StoredResponse(status=200, body=json.dumps(document))

    if request_key is None:
        return apply(conn), True
    return request_keys.create_once(
        conn, tenant_id=tenant_id, request_key=request_key, request_hash=request_hash,
        create=apply, now=now,
    )  # fmt: skip


def render_plan(
    plan: Plan, *, applied: bool, warnings: dict[int, list[dict[str, str]]]
) -> dict[str, object]:
    """The answer: each step (with the linter's ``warnings`` of its item, if any), the
    counts, whether anything changes and whether it was written (a dry run's: not)."""
    counts = {action.value: len(plan.of(action)) for action in Action}
    changed = any(step.action is not Action.UNCHANGED for step in plan.steps)
    return {
        "applied": applied,
        "changed": changed,
        "items": [_step(step, warnings) for step in plan.steps],
        "counts": {**counts, "unkeyed": plan.unkeyed, "unlisted": plan.unlisted},
    }


def _step(step: Step, warnings: dict[int, list[dict[str, str]]]) -> dict[str, object]:
    document: dict[str, object] = {
        "key": step.key,
        "action": step.action.value,
        "index": step.index,
        "schedule_id": step.schedule_id,
    }
    if step.action is Action.CHANGE:
        document["changes"] = [{"field": c.field, "old": c.old, "new": c.new} for c in step.changes]
        document["timing_changed"] = step.timing_changed
    if step.index in warnings:
        document["warnings"] = warnings[step.index]
    return document
