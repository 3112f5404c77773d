"""``/runs/{id}`` (one run: its canonical ``X-Scheduled-For``, idempotency key, attempts)
and ``/failed`` (the dead-letter view): replays through the store functions the API's
replay routes call (``store.manual``).

"Replay all N matching" states the exact count as of a snapshot time on a confirmation
page, and the replay then takes only runs last changed at or before that time: failures
arriving after the user looked are untouched.
"""

from __future__ import annotations

from quart import Blueprint, Response, redirect, request

from appliance.core.instants import format_scheduled_for, parse_instant
from appliance.core.json_text import whole_number
from appliance.core.runs import RunState
from appliance.errors import ValidationError
from appliance.store.run_search import RunFilter, search_runs
from appliance.store.usecases import manual
from appliance.store.usecases.pages import run_list
from appliance.store.users import Role
from appliance.ui.context import ui
from appliance.ui.inspector import NOT_STORED, decision, inspect_run
from appliance.ui.live_pages import live_marker
from appliance.ui.render import page
from appliance.ui.security import require

FAILED = RunFilter(states=frozenset({RunState.FAILED}))
PAGE_SIZE = 100


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/runs/<run_id>", view_func=run_page, methods=["GET"])
    bp.add_url_rule("/runs/<run_id>/replay", view_func=replay, methods=["POST"])
    bp.add_url_rule("/failed", view_func=failed, methods=["GET"])
    bp.add_url_rule("/failed/replay", view_func=replay_selected, methods=["POST"])
    bp.add_url_rule("/failed/replay-all", view_func=confirm_all, methods=["GET"])
    bp.add_url_rule("/failed/replay-all", view_func=replay_all, methods=["POST"])


async def run_page(run_id: str) -> Response:
    _, tenant_id = require(Role.VIEWER)

    ctx = ui()
    inspected = await ctx.db.read(
        inspect_run, tenant_id=tenant_id, run_id=run_id, now=ctx.clock.now_ms()
    )
    shown = inspected.page
    run = shown.run
    return await page(
        "run.html",
        run=run,
        attempts=shown.attempts,
        decisions=[decision(run, shown.attempts, i) for i in range(len(shown.attempts))],
        sent=inspected.request,
        sent_missing=inspected.missing,
        headers_not_stored=NOT_STORED,
        zone=shown.zone,
        schedule_name=shown.schedule_name,
        scheduled_for=format_scheduled_for(run.scheduled_for),
        live=live_marker(shown.newest_seq, schedule_id=run.schedule_id, run_id=run.id),
        replayable=run.state
        in (RunState.SUCCEEDED, RunState.FAILED, RunState.MISSED, RunState.CANCELLED),
    )


async def replay(run_id: str) -> Response:
    _, tenant_id = require(Role.EDITOR)
    ctx = ui()
    await ctx.db.write(
        manual.replay_run, tenant_id=tenant_id, run_id=run_id, now=ctx.clock.now_ms()
    )
    ctx.nudge()
    return redirect(f"/runs/{run_id}?done=replayed")  # type: ignore[return-value]


async def failed() -> Response:
    _, tenant_id = require(Role.VIEWER)
    shown = await ui().db.read(run_list, tenant_id=tenant_id, where=FAILED, limit=PAGE_SIZE)
    return await page(
        "failed.html",
        runs=shown.runs,
        limit=PAGE_SIZE,
        names=shown.schedule_names,
        replayed=_replayed(request.args.get("replayed", "")),
    )


def _replayed(text: str) -> int | None:
    """How many runs the replay that redirected here replayed; None after no replay."""
    value = whole_number(text)
    return value if value is not None and value >= 0 else None


async def replay_selected() -> Response:
    _, tenant_id = require(Role.EDITOR)
    ctx = ui()
    selected = (await request.form).getlist("run")
    if not selected:
        raise ValidationError.single("run", "select at least one run to replay")
    count = await ctx.db.write(
        manual.replay_runs,
        tenant_id=tenant_id,
        run_ids=selected,
        now=ctx.clock.now_ms(),
        rate_per_second=ctx.replay_rate_per_second,
    )
    ctx.nudge()
    return redirect(f"/failed?replayed={count.replayed}")  # type: ignore[return-value]


async def confirm_all() -> Response:
    _, tenant_id = require(Role.EDITOR)
    ctx = ui()
    as_of = ctx.clock.now_ms() // 1000 * 1000  # whole seconds: the form carries its text
    matched = await ctx.db.read(
        lambda conn: search_runs(
            conn, tenant_id=tenant_id, where=FAILED, limit=manual.MAX_REPLAY_MATCH + 1, as_of=as_of
        )
    )
    return await page(
        "replay_all.html",
        count=len(matched),
        too_many=len(matched) > manual.MAX_REPLAY_MATCH,
        limit=manual.MAX_REPLAY_MATCH,
        as_of=as_of,
        as_of_text=format_scheduled_for(as_of),
    )


async def replay_all() -> Response:
    _, tenant_id = require(Role.EDITOR)
    ctx = ui()
    form = await request.form
    try:
        as_of = parse_instant(form.get("as_of", ""))
    except ValueError:
        raise ValidationError.single(
            "as_of", "the confirmation is incomplete; open it again"
        ) from None
    count = await ctx.db.write(
        manual.replay_matching,
        tenant_id=tenant_id,
        where=FAILED,
        as_of=as_of,
        now=ctx.clock.now_ms(),
        rate_per_second=ctx.replay_rate_per_second,
    )
    ctx.nudge()
    return redirect(f"/failed?replayed={count.replayed}")  # type: ignore[return-value]
