"""``/v1/notifications``: a tenant's failure-notification URL (docs/receiver.md, "Failure
notifications").

- ``PUT {"url"}`` sets or replaces it, checked as a schedule's ``target_url`` is: static
  checks under the outbound policy, then the destination check (resolve and judge).
- ``GET`` answers ``{"url"}``, or 404 when none is set; ``DELETE`` removes it (204; 404
  when none was set). Notifications already queued are still delivered.
- A change is a ``notifications.updated`` event naming the key that made it (the URL's
  origin only: :mod:`appliance.store.notification_settings`); the same URL again is none.
What is delivered, and how: :mod:`appliance.core.notifications`, :mod:`appliance.engine.notifier`.
"""

from __future__ import annotations

from quart import Response
from quart_trio import QuartTrio

from appliance.api.auth import authenticate_caller, read_as_tenant
from appliance.api.bodies import json_response, read_json
from appliance.api.context import context
from appliance.core.notifications import as_url_error, parse_notification_target
from appliance.errors import NotFound, ValidationError
from appliance.store.notification_settings import remove_target, save_target
from appliance.store.notifications import get_target

_NONE = 'no notification URL is set; PUT /v1/notifications {"url": …} sets one'


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/notifications", view_func=get_notifications, methods=["GET"])
    app.add_url_rule("/v1/notifications", view_func=put_notifications, methods=["PUT"])
    app.add_url_rule("/v1/notifications", view_func=delete_notifications, methods=["DELETE"])


async def get_notifications() -> Response:
    url = await read_as_tenant(lambda conn, tenant_id: get_target(conn, tenant_id=tenant_id))
    if url is None:
        raise NotFound(_NONE)
    return json_response({"url": url})


async def put_notifications() -> Response:
    caller = await authenticate_caller()
    ctx = context()
    url = parse_notification_target(await read_json(), policy=ctx.policy)
    try:
        await ctx.check_destination(url)
    except ValidationError as error:
        raise as_url_error(error) from None
    await ctx.db.write(
        save_target,
        tenant_id=caller.tenant_id,
        url=url,
        now=ctx.clock.now_ms(),
        actor=caller.actor,
    )
    return json_response({"url": url})


async def delete_notifications() -> Response:
    caller = await authenticate_caller()
    ctx = context()
    removed = await ctx.db.write(
        remove_target, tenant_id=caller.tenant_id, now=ctx.clock.now_ms(), actor=caller.actor
    )
    if not removed:
        raise NotFound(_NONE)
    return Response(b"", status=204)  # bytes: an empty iterable body needs asyncio
