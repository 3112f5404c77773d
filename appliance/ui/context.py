"""What the web UI's views need from the composition root, injected by
:func:`appliance.ui.app.register_ui` (the same parts the API gets: docs/architecture.md).

The UI reads no wall time and owns no tasks: the clock, the database, the planner's
``nudge`` and the write-time destination check come from the runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio
from quart import current_app, request

from appliance.clock import WallClock
from appliance.core.addresses import AddressPolicy
from appliance.live.hub import EventHub
from appliance.live.limits import StreamRegistry
from appliance.store.infra.backend import Store
from appliance.ui.hashing import HashingPool
from appliance.ui.sign_in_log import UnknownSignIns

_EXTENSION = "steeple-ui"


@dataclass(frozen=True, slots=True, kw_only=True)
class UiContext:
    db: Store
    clock: WallClock
    nudge: Callable[[], None]  # wakes the planner and the dispatcher; sync, never blocks
    check_destination: Callable[[str], Awaitable[None]]  # resolve + policy; ValidationError
    policy: AddressPolicy
    max_schedules: int | None = None
    replay_rate_per_second: int
    # Reverse proxies in front whose X-Forwarded-For / -Proto entries are believed
    # (appliance.core.forwarded); 0: none.
    trust_proxy: int = 0
    # How clients reach the appliance (setup links, the receiver guide); "": the address
    # the request arrived on (the listening socket's), never the request's Host.
    public_url: str = ""
    version: str = ""  # shown on the operator's health page
    # The API's live-feed hub (one reader for every stream, API's and UI's); None: no
    # live feed, /events polls.
    event_hub: EventHub | None = None
    # The process's open streams and their caps: the API's registry (one count for both).
    streams: StreamRegistry = field(default_factory=StreamRegistry)
    # Previews and the dashboard's next occurrences run in worker threads, one at a time.
    cpu: trio.CapacityLimiter = field(default_factory=lambda: trio.CapacityLimiter(1))
    # Password hashing has threads of its own and a bounded queue (ui/hashing.py).
    passwords: HashingPool = field(default_factory=HashingPool)
    # Failed sign-ins that name no tenant's user: the operator's log, bounded.
    unknown_sign_ins: UnknownSignIns = field(default_factory=UnknownSignIns)


def install(app_extensions: dict[str, object], context: UiContext) -> None:
    app_extensions[_EXTENSION] = context


def ui() -> UiContext:
    """The UI context of the app answering the current request."""
    value = current_app.extensions[_EXTENSION]
    if not isinstance(value, UiContext):
        raise TypeError("the web UI was not registered by appliance.ui.app.register_ui")
    return value


def public_base_url() -> str:
    """The base of links the UI hands out (``https://cron.example.org``, no slash):
    ``public_url``, else the local address of the connection. Never the ``Host`` header,
    which the client writes."""
    configured = ui().public_url
    if configured:
        return configured
    server = request.scope.get("server") or ("127.0.0.1", 80)
    host, port = str(server[0]), server[1]
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if request.scheme == "https" else "http"
    return f"{scheme}://{shown}" if port is None else f"{scheme}://{shown}:{port}"
