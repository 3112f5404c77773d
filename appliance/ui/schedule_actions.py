"""The actions on schedules in the UI: pause (with a note), resume, run now, delete, and
the same for the selected rows at once (all or none, in one transaction:
:func:`appliance.store.usecases.bulk_change.change_schedules`) — each the store
function the API calls for the same thing, with the session's tenant and the user as the
actor.

A pause note is read by the API's own :func:`appliance.store.pauses.parse_note`; a bad one
is shown beside its field (422) and nothing is paused.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from quart import Blueprint, Response, redirect, request

from appliance.core.events import Actor
from appliance.core.schedules import Schedule
from appliance.errors import ValidationError
from appliance.store import pauses
from appliance.store import schedules as store
from appliance.store.usecases import manual
from appliance.store.usecases.bulk_change import Change, change_schedules
from appliance.store.users import Role
from appliance.ui.context import ui
from appliance.ui.redirects import local_path
from appliance.ui.render import page
from appliance.ui.schedules import detail, list_page, load_schedule
from appliance.ui.security import require


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/schedules/<schedule_id>/pause", view_func=pause, methods=["POST"])
    bp.add_url_rule("/schedules/<schedule_id>/resume", view_func=resume, methods=["POST"])
    bp.add_url_rule("/schedules/<schedule_id>/run", view_func=run_now, methods=["POST"])
    bp.add_url_rule("/schedules/selected", view_func=change_selected, methods=["POST"])
    bp.add_url_rule("/schedules/<schedule_id>/delete", view_func=delete_form, methods=["GET"])
    bp.add_url_rule("/schedules/<schedule_id>/delete", view_func=delete, methods=["POST"])


async def pause(schedule_id: str) -> Response:
    _, tenant_id = require(Role.EDITOR)
    text = (await request.form).get("note", "")
    try:
        note = pauses.parse_note(text)
    except ValidationError as error:
        return await detail(
            tenant_id, schedule_id, note=text, note_error=_message(error), status=422
        )
    return await _change(functools.partial(pauses.pause_schedule, note=note), schedule_id, "paused")


def _message(error: ValidationError) -> str:
    return "; ".join(e.message for e in error.errors)


async def resume(schedule_id: str) -> Response:
    return await _change(pauses.resume_schedule, schedule_id, "resumed")


async def _change(change: Callable[..., Schedule], schedule_id: str, done: str) -> Response:
    session, tenant_id = require(Role.EDITOR)
    ctx = ui()
    await ctx.db.write(
        change,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    ctx.nudge()
    return redirect(_back(f"/schedules/{schedule_id}") + f"done={done}")  # type: ignore[return-value]


_BULK = {"pause": "paused", "resume": "resumed"}
MAX_SELECTED = 200


async def change_selected() -> Response:
    """Pause, resume or run now every selected schedule, all or none (one transaction:
    a foreign or deleted id is NotFound and nothing changes)."""
    session, tenant_id = require(Role.EDITOR)
    ctx = ui()
    form = await request.form
    selected = list(dict.fromkeys(form.getlist("schedule")))
    action = form.get("action", "")
    if not selected or len(selected) > MAX_SELECTED:
        raise ValidationError.single("schedule", f"select 1 to {MAX_SELECTED} schedules")
    if action not in tuple(Change):
        raise ValidationError.single("action", "must be pause, resume or run")
    text = form.get("note", "")
    try:
        note = pauses.parse_note(text) if action == "pause" else None
    except ValidationError as error:
        return await list_page(
            note=text, note_error=_message(error), selected=frozenset(selected), status_code=422
        )
    await ctx.db.write(
        change_schedules,
        tenant_id=tenant_id,
        schedule_ids=selected,
        change=Change(action),
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
        note=note,
    )
    ctx.nudge()
    done = _BULK.get(action, "triggered-all")
    return redirect(_back("/schedules") + f"done={done}")  # type: ignore[return-value]


async def run_now(schedule_id: str) -> Response:
    _, tenant_id = require(Role.EDITOR)
    ctx = ui()
    run, created = await ctx.db.write(
        manual.trigger_schedule,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        now=ctx.clock.now_ms(),
    )
    if created:
        ctx.nudge()
    return redirect(f"/runs/{run.id}?done=triggered")  # type: ignore[return-value]


async def delete_form(schedule_id: str) -> Response:
    _, tenant_id = require(Role.EDITOR)
    schedule = await load_schedule(tenant_id, schedule_id)
    return await page("schedule_delete.html", schedule=schedule)


async def delete(schedule_id: str) -> Response:
    session, tenant_id = require(Role.EDITOR)
    ctx = ui()
    await ctx.db.write(
        store.delete_schedule,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    ctx.nudge()
    return redirect("/schedules?done=deleted")  # type: ignore[return-value]


def _back(default: str) -> str:
    """Where an action returns to: the local page it was posted from, or ``default``;
    with a ``?``/``&`` ready for one more parameter."""
    target = local_path(request.args.get("back", ""), default)
    return target + ("&" if "?" in target else "?")
