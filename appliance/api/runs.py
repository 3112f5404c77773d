"""Run views: a schedule's runs (newest first), one run with its attempts, replay, resend.

Runs are read through ``store.runs`` and scoped by tenant: another tenant's schedule or run
id answers 404 exactly like a missing one. A replay re-opens a terminal run as the *same*
run (same id, same ``X-Idempotency-Key``) with new attempts; a run still open answers 409.

``POST /v1/runs/{id}/resend`` takes ``{"key": "same" | "new"}``: ``same`` *is* the replay
(the same view function answers both); ``new`` makes a copy under a fresh key
(:mod:`appliance.store.usecases.resend`): 201 with the copy, or 200 with the copy a resend of the
same run made within the same second.
"""

from __future__ import annotations

from quart import Response
from quart_trio import QuartTrio
from werkzeug.routing import BaseConverter

from appliance.api.auth import authenticate, authenticate_caller, checked_inputs, read_as_tenant
from appliance.api.bodies import json_response, read_json
from appliance.api.context import context
from appliance.api.pagination import encode_cursor, number_position, page_request
from appliance.api.rendering import render_run, render_run_with_attempts
from appliance.core.json_fields import FieldReader
from appliance.errors import ValidationError
from appliance.store import runs as run_store
from appliance.store.usecases.manual import replay_run as store_replay_run
from appliance.store.usecases.pages import schedule_runs
from appliance.store.usecases.resend import resend_copy


class RunIdConverter(BaseConverter):
    """A run id in a path: any segment but ``replay``, which is the bulk replay's
    (``/v1/runs/replay``, :mod:`appliance.api.run_search`), so that path advertises only
    its own method in ``Allow``, not ``GET /v1/runs/{run_id}``'s."""

    regex = r"(?!replay$)[^/]+"


def register(app: QuartTrio) -> None:
    app.url_map.converters["run_id"] = RunIdConverter
    app.add_url_rule("/v1/schedules/<schedule_id>/runs", view_func=list_runs, methods=["GET"])
    app.add_url_rule("/v1/runs/<run_id:run_id>", view_func=get_run, methods=["GET"])
    app.add_url_rule("/v1/runs/<run_id:run_id>/replay", view_func=replay_run, methods=["POST"])
    app.add_url_rule("/v1/runs/<run_id:run_id>/resend", view_func=resend_run, methods=["POST"])


async def list_runs(schedule_id: str) -> Response:
    page = await checked_inputs(lambda: page_request("run"))
    before = await checked_inputs(lambda: number_position(page))
    runs = await read_as_tenant(
        lambda conn, tenant_id: schedule_runs(
            conn,
            tenant_id=tenant_id,
            schedule_id=schedule_id,
            limit=page.limit + 1,
            before_scheduled_for=before,
        )
    )
    more = len(runs) > page.limit
    cursor = encode_cursor("run", str(runs[page.limit - 1].scheduled_for)) if more else None
    return json_response(
        {"items": [render_run(run) for run in runs[: page.limit]], "next_cursor": cursor}
    )


async def get_run(run_id: str) -> Response:
    run, attempts = await read_as_tenant(
        lambda conn, tenant_id: run_store.run_with_attempts(
            conn, tenant_id=tenant_id, run_id=run_id
        )
    )
    return json_response(render_run_with_attempts(run, attempts))


async def replay_run(run_id: str) -> Response:
    return await _replay(await authenticate(), run_id)


async def _replay(tenant_id: str, run_id: str) -> Response:
    ctx = context()
    run = await ctx.db.write(
        store_replay_run, tenant_id=tenant_id, run_id=run_id, now=ctx.clock.now_ms()
    )
    ctx.nudge()
    attempts = await ctx.db.read(run_store.list_attempts, run_id=run.id)
    return json_response(render_run_with_attempts(run, attempts))


_KEYS = ("same", "new")


async def resend_run(run_id: str) -> Response:
    caller = await authenticate_caller()
    key = _resend_key(await read_json())
    if key == "same":
        return await _replay(caller.tenant_id, run_id)
    ctx = context()
    copy, created = await ctx.db.write(
        resend_copy,
        tenant_id=caller.tenant_id,
        run_id=run_id,
        now=ctx.clock.now_ms(),
        actor=caller.actor,
    )
    if created:
        ctx.nudge()
    document = render_run_with_attempts(copy, [])
    if not created:
        return json_response(document)
    return json_response(document, status=201, headers={"Location": f"/v1/runs/{copy.id}"})


def _resend_key(obj: object) -> str:
    """The ``key`` of a resend body: ``same`` or ``new``, nothing else in the object."""
    if not isinstance(obj, dict):
        raise ValidationError.single(
            "$", 'the request body must be a JSON object, e.g. {"key": "new"}'
        )
    fields = FieldReader(obj)
    fields.unknown(("key",))
    key = obj.get("key")
    if key not in _KEYS:
        fields.fail(
            "key",
            '"same" delivers the run again under its own key (a replay); "new" delivers a'
            " copy under a fresh key",
        )
    if fields.errors:
        raise ValidationError(fields.errors)
    return str(key)
