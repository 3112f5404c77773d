"""What the views need from the composition root, injected by ``create_app``.

The API owns no tasks and reads no wall time: the clock, the database, the planner's
``nudge``, the write-time destination check and the dedupe test's sender all come from the
runtime (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from quart import current_app, request

from appliance.clock import WallClock
from appliance.core.addresses import AddressPolicy
from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.core.forwarded import client_address
from appliance.core.hosts import AllowedHosts
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.store.infra.backend import Store

if TYPE_CHECKING:
    from appliance.live.hub import EventHub
    from appliance.live.limits import StreamRegistry

_EXTENSION = "steeple"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiContext:
    db: Store
    clock: WallClock
    nudge: Callable[[], None]  # wakes the planner and the dispatcher; sync, never blocks
    check_destination: Callable[[str], Awaitable[None]]  # resolve + policy; ValidationError
    policy: AddressPolicy
    version: str
    event_hub: EventHub  # the live event stream's fan-out, run by the runtime's nursery
    streams: StreamRegistry  # the process's open streams and their caps (the UI's too)
    max_schedules: int | None = None  # live schedules per tenant (None: no limit)
    replay_rate_per_second: int  # how fast a bulk replay's runs become due (settings)
    # Sends one request through the engine's delivery client (outbound policy checked at
    # connect time), for the dedupe test; None: not wired (the test answers 503).
    send_probe: Callable[[DeliveryRequest], Awaitable[ProbeAnswer]] | None = None
    # The app's own occurrence cache (next_runs of every schedule response): event-loop
    # only, never in write transactions (the planner owns another, on the writer thread)
    upcoming: OccurrenceCache = field(default_factory=OccurrenceCache)
    # CPU-heavy view work (a preview's occurrences) runs in one worker thread at a time
    cpu: trio.CapacityLimiter = field(default_factory=lambda: trio.CapacityLimiter(1))
    # The Host names answered (appliance.core.hosts) and the reverse proxies trusted for
    # X-Forwarded-For (appliance.core.forwarded): the settings allowed_hosts, trust_proxy.
    allowed_hosts: AllowedHosts = field(default_factory=AllowedHosts.loopback)
    trust_proxy: int = 0
    # Told the peer of a request carrying X-Forwarded-For while trust_proxy is 0 (a
    # proxy nobody declared); sync, cheap (the runtime records the first only).
    on_untrusted_forwarding: Callable[[str], None] | None = None


def install(app_extensions: dict[str, object], context: ApiContext) -> None:
    app_extensions[_EXTENSION] = context


def context() -> ApiContext:
    """The context of the app answering the current request."""
    value = current_app.extensions[_EXTENSION]
    if not isinstance(value, ApiContext):
        raise TypeError("the app was not built by appliance.api.app.create_app")
    return value


def request_client() -> str:
    """The client's address under the ``trust_proxy`` rule (appliance.core.forwarded)."""
    forwarded = request.headers.getlist("X-Forwarded-For")
    return client_address(request.remote_addr, forwarded, context().trust_proxy)
