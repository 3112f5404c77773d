"""The appliance's HTTP side: the API and the web UI built on the engine's parts, and
hypercorn serving them (docs/architecture.md, "One process", step 6).

- The web stack (quart, hypercorn: most of the import time) is imported only inside these
  functions — :func:`import_web_stack` loads it in a worker thread while the engine
  already delivers, so a restart's first redelivery does not wait for it.
- The web app owns none of the scheduler's tasks: it gets the store, the clock and a
  ``nudge()`` callable; the event hub it streams from runs in the root nursery.
- A socket that cannot be bound is one line with the fix
  (:class:`~appliance.errors.ConfigError` naming ``listen``), never a traceback; an error
  after the sockets are bound is raised as it is.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from appliance import __version__
from appliance.clock import WallClock
from appliance.core.addresses import AddressPolicy
from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.core.hosts import AllowedHosts
from appliance.core.lifecycle import Lifecycle
from appliance.engine.delivery import DeliveryClient, check_destination, probe_answer, send
from appliance.errors import ConfigError
from appliance.live.limits import StreamLimits, StreamRegistry
from appliance.settings.model import Settings
from appliance.store.infra.backend import Store
from appliance.store.proxy_seen import proxy_seen_recorder

if TYPE_CHECKING:
    from quart_trio import QuartTrio

    from appliance.live.hub import EventHub


def import_web_stack() -> None:
    """Load the web stack's modules (run in a worker thread: the imports are slow)."""
    import hypercorn.trio  # noqa: F401
    import quart_trio  # noqa: F401

    import appliance.api.app
    import appliance.api.serving
    import appliance.ui.app  # noqa: F401


def stream_limits(settings: Settings) -> StreamLimits:
    """Open live streams at most, per key, per session, per tenant and in all."""
    return StreamLimits(
        per_key=settings.max_streams_per_key,
        per_session=settings.max_streams_per_session,
        per_tenant=settings.max_streams_per_tenant,
        per_process=settings.max_streams,
    )


def build_web_app(
    settings: Settings,
    *,
    db: Store,
    clock: WallClock,
    nudge: Callable[[], None],
    policy: AddressPolicy,
    client: DeliveryClient,
    lifecycle: Lifecycle,
) -> tuple[QuartTrio, EventHub]:
    """The API with the web UI registered on it, and the event hub their live streams
    follow (the caller runs it)."""
    from appliance.api.app import create_app
    from appliance.api.metrics import Observability
    from appliance.live.hub import EventHub
    from appliance.ui.app import register_ui
    from appliance.ui.context import UiContext

    async def check(url: str) -> None:
        await check_destination(policy, url)

    async def send_probe(request: DeliveryRequest) -> ProbeAnswer:
        return probe_answer(await send(client, request))

    app = create_app(
        db=db,
        clock=clock,
        nudge=nudge,
        check_destination=check,
        policy=policy,
        version=__version__,
        event_hub=(event_hub := EventHub(db)),
        streams=(streams := StreamRegistry(limits=stream_limits(settings))),
        max_schedules=settings.max_schedules_per_tenant,
        replay_rate_per_second=settings.replay_rate_per_second,
        send_probe=send_probe,
        allowed_hosts=AllowedHosts.of(settings.host_allow_list),
        trust_proxy=settings.trust_proxy,
        on_untrusted_forwarding=proxy_seen_recorder(settings.data_dir, clock.now_ms),
        observability=Observability(
            lifecycle=lifecycle,
            metrics_allow=settings.metrics_allow,
            metrics_token=settings.metrics_token,
        ),
    )
    register_ui(
        app,
        UiContext(
            db=db,
            clock=clock,
            nudge=nudge,
            check_destination=check,
            policy=policy,
            max_schedules=settings.max_schedules_per_tenant,
            replay_rate_per_second=settings.replay_rate_per_second,
            trust_proxy=settings.trust_proxy,
            public_url=settings.public_url,
            version=__version__,
            event_hub=event_hub,
            streams=streams,
        ),
    )
    return app, event_hub


async def serve_http(
    app: QuartTrio, settings: Settings, stop: trio.Event, *, task_status: trio.TaskStatus[list[str]]
) -> None:
    """Serve ``app`` on the ``listen`` address until ``stop`` is set; reports the bound
    addresses once the sockets are bound."""
    import hypercorn.config
    import hypercorn.trio

    from appliance.api.serving import KEEP_ALIVE_TIMEOUT_S, READ_TIMEOUT_S, install

    install()  # connections read on while a stream is answered: a client that leaves is seen
    config = hypercorn.config.Config()
    config.bind = [str(settings.listen)]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")  # through our handlers, once
    config.graceful_timeout = 5
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT_S  # between requests
    config.read_timeout = READ_TIMEOUT_S  # while a request is owed, never during a response
    reporter = _Bound(task_status)
    try:
        await hypercorn.trio.serve(app, config, shutdown_trigger=stop.wait, task_status=reporter)
    except* OSError as group:
        if reporter.bound:
            raise
        # hypercorn binds inside its nurseries, before reporting started: the group holds
        # the bind's OSError alone.
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise ConfigError("listen", _bind_failure(settings, leaf)) from None  # type: ignore[arg-type]


class _Bound:
    """Passes hypercorn's started report on, remembering that the sockets are bound."""

    def __init__(self, task_status: trio.TaskStatus[list[str]]) -> None:
        self._task_status = task_status
        self.bound = False

    def started(self, value: list[str] | None = None) -> None:
        self.bound = True
        self._task_status.started(value or [])


def _bind_failure(settings: Settings, exc: OSError) -> str:
    """One line with the fix for a socket that cannot be bound."""
    if exc.errno == errno.EADDRINUSE:
        why = "another program is listening there (another Steeple?)"
    elif exc.errno == errno.EACCES:
        why = "ports below 1024 need privileges Steeple should not have"
    elif exc.errno == errno.EADDRNOTAVAIL:
        why = "no network interface of this machine has that address"
    else:
        why = exc.strerror or str(exc)
    return f"cannot listen on {settings.listen}: {why}; choose another with --listen HOST:PORT"
