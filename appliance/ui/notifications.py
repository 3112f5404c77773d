"""``/settings/notifications``: an owner views, sets and removes the tenant's
failure-notification URL — the page over what ``/v1/notifications`` does
(docs/receiver.md, "Failure notifications"; docs/ui.md, "Notifications").

Rules this module guards:

- One validator: the URL is checked exactly as ``PUT /v1/notifications`` checks it —
  :func:`appliance.core.notifications.parse_notification_target` under the outbound
  policy, then the destination check (resolve and judge) — and stored by the same store
  function (:mod:`appliance.store.notification_settings`), so the change is a
  ``notifications.updated`` event naming the owner.
- A refused URL changes nothing: the page answers 422 with the message beside the field
  and the text as typed, and the stored URL stays as it was.
- Both forms are POSTs with the session's CSRF token (``appliance.ui.security``); a
  change redirects back to the page, so a reload does not send it again.
"""

from __future__ import annotations

from typing import Final

from quart import Blueprint, Response, redirect, request

from appliance.core.events import Actor
from appliance.core.notifications import as_url_error, parse_notification_target
from appliance.errors import ValidationError
from appliance.store.notification_settings import remove_target, save_target
from appliance.store.notifications import get_target
from appliance.store.users import Role
from appliance.ui.context import ui
from appliance.ui.render import page
from appliance.ui.security import require

PATH: Final = "/settings/notifications"
# What the page says after a change (``?done=``); anything else: nothing.
DONE: Final = {
    "set": "Notification URL set: failures are now sent to it.",
    "replaced": "Notification URL replaced: failures now go to the new one.",
    "unchanged": "That URL was set already: nothing changed.",
    "removed": "Notification URL removed: failures are no longer sent anywhere.",
    "none": "No notification URL was set: nothing changed.",
}


def register(bp: Blueprint) -> None:
    bp.add_url_rule(PATH, view_func=notifications, methods=["GET"])
    bp.add_url_rule(PATH, view_func=save_notifications, methods=["POST"])
    bp.add_url_rule(f"{PATH}/remove", view_func=remove_notifications, methods=["POST"])


async def notifications() -> Response:
    return await _show(done=DONE.get(request.args.get("done", "")))


async def save_notifications() -> Response:
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    typed = (await request.form).get("url", "")
    try:
        url = parse_notification_target({"url": typed.strip()}, policy=ctx.policy)
        await _check_destination(url)
    except ValidationError as error:
        return await _show(typed=typed, errors=[e.message for e in error.errors], status=422)
    change = await ctx.db.write(
        save_target,
        tenant_id=tenant_id,
        url=url,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    return _done("unchanged" if change is None else str(change))


async def remove_notifications() -> Response:
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    removed = await ctx.db.write(
        remove_target,
        tenant_id=tenant_id,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    return _done("removed" if removed else "none")


async def _check_destination(url: str) -> None:
    try:
        await ui().check_destination(url)
    except ValidationError as error:
        raise as_url_error(error) from None


async def _show(
    *,
    typed: str | None = None,
    errors: list[str] | None = None,
    done: str | None = None,
    status: int = 200,
) -> Response:
    _, tenant_id = require(Role.OWNER)
    current = await ui().db.read(get_target, tenant_id=tenant_id)
    return await page(
        "notifications.html",
        status=status,
        current=current,
        typed=current if typed is None else typed,
        errors=errors or [],
        done=done,
    )


def _done(what: str) -> Response:
    return redirect(f"{PATH}?done={what}")  # type: ignore[return-value]
