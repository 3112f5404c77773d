"""The tenant REST API as a quart-trio app: ``/v1`` routes and ``/healthz``
(docs/architecture.md, "The API").

``create_app`` is the only way to get an app: nothing is built at import time, the app owns
no tasks (the runtime's root nursery runs the scheduler; hypercorn serves this), and every
dependency — database, wall clock, ``nudge``, the write-time destination check and the
outbound policy — is passed in. ``contracts/openapi/scheduler.yaml`` is the source of truth
for the routes registered here; a test checks both directions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from quart import Response, request
from quart_trio import QuartTrio
from quart_trio.wrappers import TrioRequest

from appliance.api import (
    cron,
    curl,
    dedupe_test,
    events,
    keys,
    metrics,
    notifications,
    run_search,
    runs,
    schedule_apply,
    schedule_batch,
    schedules,
    secrets,
    stream,
)
from appliance.api.bodies import drain_request_body, json_response
from appliance.api.context import ApiContext, context, install
from appliance.api.problems import Problem, register_problem_handlers
from appliance.clock import WallClock
from appliance.core.addresses import AddressPolicy
from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.core.hosts import AllowedHosts
from appliance.core.json_text import NUL_MESSAGE, field_with_nul
from appliance.errors import NotFound, ValidationError
from appliance.live.hub import EventHub
from appliance.live.limits import StreamRegistry
from appliance.store.infra.backend import Store

# A 64 KiB body escaped inside a JSON string can double in size; anything beyond this is
# not a schedule (413 before parsing).
MAX_REQUEST_BYTES = 256 * 1024
# Liveness and readiness answer any Host: load balancers probe by address, and they tell
# nothing a direct request would not (status and version).
HOST_EXEMPT = frozenset({"/healthz", "/readyz"})
# Routes whose bodies may be larger: (method, path) -> bytes.
_LARGER_BODIES = {
    ("POST", schedule_batch.PATH): schedule_batch.MAX_BATCH_REQUEST_BYTES,
    ("POST", schedule_apply.PATH): schedule_apply.MAX_APPLY_REQUEST_BYTES,
}


class _Request(TrioRequest):
    """A request whose body limit is its route's (``request.max_content_length``): most
    are :data:`MAX_REQUEST_BYTES`, a batch create's more. Set when the request is built,
    so a larger ``Content-Length`` is refused (413) before any of the body is read."""

    def __init__(self, method: str, scheme: str, path: str, *args: Any, **kw: Any) -> None:
        limit = _LARGER_BODIES.get((method, path))
        if limit is not None:
            kw["max_content_length"] = limit
        super().__init__(method, scheme, path, *args, **kw)
        if limit is not None:
            self.max_content_length = limit


async def refuse_nul_in_url() -> None:
    """``before_request`` of every route, the UI's too (:mod:`appliance.core.json_text`'s
    NUL rule): a path segment holding a NUL names nothing (404, as an unknown id); a query
    parameter holding one is a 422 naming it."""
    segments = [(name, str(value)) for name, value in (request.view_args or {}).items()]
    name = field_with_nul(segments)
    if name is not None:
        raise NotFound(f"no {name} holds a NUL character")
    name = field_with_nul(request.args.items(multi=True))
    if name is not None:
        raise ValidationError.single(name, NUL_MESSAGE)


def create_app(
    *,
    db: Store,
    clock: WallClock,
    nudge: Callable[[], None],
    check_destination: Callable[[str], Awaitable[None]],
    policy: AddressPolicy,
    version: str,
    event_hub: EventHub,
    streams: StreamRegistry | None = None,  # None: one of its own, default limits
    max_schedules: int | None = None,
    replay_rate_per_second: int,
    observability: metrics.Observability | None = None,
    send_probe: Callable[[DeliveryRequest], Awaitable[ProbeAnswer]] | None = None,
    allowed_hosts: AllowedHosts | None = None,
    trust_proxy: int = 0,
    on_untrusted_forwarding: Callable[[str], None] | None = None,
) -> QuartTrio:
    app = QuartTrio(__name__, static_folder=None)
    app.request_class = _Request
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES
    install(
        app.extensions,
        ApiContext(
            db=db,
            clock=clock,
            nudge=nudge,
            check_destination=check_destination,
            policy=policy,
            version=version,
            event_hub=event_hub,
            streams=streams or StreamRegistry(),
            max_schedules=max_schedules,
            replay_rate_per_second=replay_rate_per_second,
            send_probe=send_probe,
            allowed_hosts=allowed_hosts or AllowedHosts.loopback(),
            trust_proxy=trust_proxy,
            on_untrusted_forwarding=on_untrusted_forwarding,
        ),
    )
    register_problem_handlers(app)
    app.before_request(note_forwarding)
    app.before_request(check_host)  # app-wide, before any blueprint's (the UI's too)
    app.before_request(refuse_nul_in_url)
    app.after_request(drain_request_body)
    app.add_url_rule("/healthz", view_func=healthz, methods=["GET"])
    schedules.register(app)
    schedule_batch.register(app)
    schedule_apply.register(app)
    runs.register(app)
    curl.register(app)
    dedupe_test.register(app)
    run_search.register(app)
    cron.register(app)
    keys.register(app)
    events.register(app)
    stream.register(app)
    secrets.register(app)
    notifications.register(app)
    metrics.register(app, observability or metrics.Observability.without_runtime())
    return app


async def healthz() -> Response:
    """Liveness without authentication: the process answers HTTP."""
    return json_response({"status": "ok", "version": context().version})


async def note_forwarding(*_: object) -> None:
    """``before_request``: report an ``X-Forwarded-For`` no trusted proxy explains."""
    ctx = context()
    if ctx.on_untrusted_forwarding and not ctx.trust_proxy and "X-Forwarded-For" in request.headers:
        ctx.on_untrusted_forwarding(request.remote_addr or "unknown")


async def check_host(*_: object) -> None:
    """``before_request``: refuse a ``Host`` outside ``allowed_hosts`` (DNS rebinding)."""
    if request.path in HOST_EXEMPT or context().allowed_hosts.allows(request.headers.get("Host")):
        return
    raise Problem(
        status=400,
        kind="host-not-allowed",
        title="Host not allowed",
        detail="this appliance does not answer that Host name: an operator adds it to the"
        " allowed_hosts setting (or sets public_url)",
    )
