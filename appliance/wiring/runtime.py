"""The composition root: builds every part from the settings and runs them in one nursery.

Start order (docs/architecture.md, "One process"): data directory (created private, or
its modes tightened with one log line) → lock file → database (migrate) → incarnation (the
previous one read first) and boot-time reclaim → the engine
(:func:`appliance.engine.assembly.build_engine`: planner, dispatcher with heartbeats,
reaper, pruner, checkpointer, liveness mark), the restart's downtime report (once the
planner caught up: :mod:`appliance.engine.restarts`) and the database check
(``quick_check``, beside them: it reads the whole file, and a restart must not wait for
that before delivering) → the HTTP server. Every task is started with ``nursery.start`` in
the root nursery, which owns them all; the web app owns none. A failed check stops the
appliance like any store failure; so does a service that crashes, loudly. SIGTERM/SIGINT:
stop claiming, let in-flight deliveries finish within the grace period, stop the server,
record the incarnation's end, close the database. A second signal during the drain stops
at once (what is still in flight is reclaimed at the next start).

Start-up failures are one line with the fix (:class:`~appliance.errors.SteepleError`):
a data directory this user cannot use, a port already in use, a lock held by another
appliance. At boot the appliance also says how many active schedules the address policy
now refuses (:mod:`appliance.engine.delivery.audit`).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

import trio

from appliance import __version__
from appliance.clock import SharedClock, SystemClock, WallClock
from appliance.core.addresses import AddressPolicy
from appliance.core.breaker import BreakerConfig
from appliance.core.dedupe_test import ProbeAnswer
from appliance.core.delivery import DeliveryRequest
from appliance.core.hosts import AllowedHosts
from appliance.core.lifecycle import Lifecycle
from appliance.engine.assembly import EngineConfig, build_engine
from appliance.engine.backups import BackupConfig
from appliance.engine.checkpointer import CheckpointerConfig
from appliance.engine.delivery import DeliveryClient, check_destination, probe_answer, send
from appliance.engine.delivery.audit import refused_destinations, report
from appliance.engine.dispatcher import DispatchConfig
from appliance.engine.leadership import LeadershipConfig
from appliance.engine.liveness import LivenessConfig
from appliance.engine.notifier import NotifierConfig
from appliance.engine.pruner import PrunerConfig
from appliance.engine.restarts import report_restart
from appliance.errors import ConfigError
from appliance.live.limits import StreamLimits, StreamRegistry
from appliance.settings import Settings
from appliance.store.figures.operator import active_targets
from appliance.store.incarnations import (
    end_incarnation,
    previous_incarnation,
    record_check,
    register_incarnation,
)
from appliance.store.infra.backend import Store
from appliance.store.proxy_seen import proxy_seen_recorder
from appliance.store.usecases.plan_pass import PlannerConfig
from appliance.store.usecases.reclaim import reclaim_previous
from appliance.wiring import storage
from appliance.wiring.sdnotify import notify, watchdog_interval_s
from appliance.wiring.watchdog import pet_watchdog

if TYPE_CHECKING:
    from quart_trio import QuartTrio


log = logging.getLogger("steeple")

# The trio thread makes a socket syscall per send and receive, releasing the GIL each
# time, while worker threads run SQLite through apsw. Getting the GIL back can take a whole
# switch interval (CPython's default 5 ms) when a worker holds it: a convoy that idles the
# event loop. 1 ms delivered a 5,000 burst ≈ 20–30 % sooner at the same CPU
# (bench/HISTORY.md); much shorter intervals cost more in switching than they save.
GIL_SWITCH_INTERVAL_S = 0.001
USER_AGENT = f"Steeple/{__version__}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    """What ``serve`` reports once it accepts requests."""

    addresses: list[str]
    incarnation_id: str


async def serve(
    settings: Settings,
    clock: WallClock | None = None,
    *,
    task_status: trio.TaskStatus[Started] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the appliance until SIGTERM/SIGINT."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)  # process-wide: this process is the appliance
    clock = clock or SystemClock()
    policy = AddressPolicy.parse(settings.allow_targets)
    log.info(
        "steeple %s: database %s, settings from %s",
        __version__,
        storage.describe(settings),
        settings.config_file or "defaults, environment and flags",
    )
    with storage.data_dir_lock(settings):
        notify("STATUS=opening and migrating the database")
        db = storage.open_configured_store(settings, check=False)  # checked beside services
        try:
            if settings.uses_postgres:
                clock = await storage.shared_clock(db, clock)  # type: ignore[arg-type]
            await _run(settings, clock, policy, db, task_status)
        finally:
            db.close()  # after the nursery: a hard cancel skips the app's after_serving


async def _run(
    settings: Settings,
    clock: WallClock,
    policy: AddressPolicy,
    db: Store,
    task_status: trio.TaskStatus[Started],
) -> None:
    notify("STATUS=reclaiming runs left by an earlier process")
    started_at = clock.now_ms()
    incarnation = await db.write(register_incarnation, pid=os.getpid(), now=started_at)
    previous, reclaimed = None, 0
    if not settings.uses_postgres:  # replicas: another one's runs are live, not left behind
        previous = await db.read(previous_incarnation, incarnation_id=incarnation)
        reclaimed = await db.write(reclaim_previous, incarnation_id=incarnation, now=started_at)
    if reclaimed:
        log.warning("reclaimed %d runs left running by an earlier process", reclaimed)
    lifecycle = Lifecycle()
    async with delivery_client(settings, policy) as client, trio.open_nursery() as nursery:
        engine = build_engine(
            db=db,
            clock=clock,
            client=client,
            incarnation_id=incarnation,
            config=engine_config(settings),
        )
        await nursery.start(engine.run)
        nudge = engine.nudge
        if isinstance(clock, SharedClock):  # a replica on PostgreSQL
            nudge = await storage.start_replica_services(nursery, settings, db, clock, nudge)  # type: ignore[arg-type]
        lifecycle.engine_running = True
        if previous is not None:  # a restart: report the downtime once planning caught up
            await nursery.start(
                partial(
                    report_restart,
                    db=db,
                    clock=clock,
                    previous=previous,
                    restarted_at=started_at,
                    reclaimed=reclaimed,
                    caught_up=None if engine.planner is None else engine.planner.caught_up,
                )
            )
        await nursery.start(_check, db, incarnation, clock)
        await nursery.start(_audit_destinations, db, policy)

        # The web stack (quart, hypercorn: most of the import time) loads in a worker
        # thread while the engine already delivers: a restart's first redelivery does not
        # wait for it.
        await trio.to_thread.run_sync(_import_web_stack)
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
        await nursery.start(event_hub.run)
        stop_http = trio.Event()
        addresses = await nursery.start(_serve_http, app, settings, stop_http)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            log.info("steeple %s listening on %s", __version__, " ".join(addresses))
            notify(f"READY=1\nSTATUS=serving on {' '.join(addresses)}")
            if (interval := watchdog_interval_s()) is not None:
                await nursery.start(
                    pet_watchdog, lifecycle, _writer_round_trip(db), interval, notify
                )
            task_status.started(Started(addresses=addresses, incarnation_id=incarnation))
            async for signum in signals:
                log.info("received %s", signal.Signals(signum).name)
                break
            lifecycle.draining = True  # /readyz answers 503 from now on
            notify("STOPPING=1\nSTATUS=draining in-flight deliveries")
            log.info(
                "stopping: no new claims; in-flight deliveries have %ss (a second signal"
                " stops at once)",
                settings.shutdown_grace_seconds,
            )
            await _drain(engine.dispatcher.drain, signals, settings.shutdown_grace_seconds)
        event_hub.close()  # streams end now: hypercorn waits for open responses
        stop_http.set()
        nursery.cancel_scope.cancel()
    await db.write(end_incarnation, incarnation_id=incarnation, now=clock.now_ms())
    log.info("stopped")


async def _drain(
    drain: Callable[[], Awaitable[None]], signals: AsyncIterator[int], grace_seconds: int
) -> None:
    """Let in-flight deliveries finish within the grace period, or until another signal."""

    async def hurry(cancel_scope: trio.CancelScope) -> None:
        async for signum in signals:
            log.warning(
                "received %s again: stopping now; deliveries still in flight are taken back"
                " at the next start",
                signal.Signals(signum).name,
            )
            cancel_scope.cancel()

    with trio.move_on_after(grace_seconds):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hurry, nursery.cancel_scope)
            await drain()
            nursery.cancel_scope.cancel()


def _writer_round_trip(db: Store) -> Callable[[], Awaitable[None]]:
    async def round_trip() -> None:
        await db.write(_nothing)

    return round_trip


def _nothing(conn: object) -> None:
    """An empty write transaction: proves the writer thread and the file answer."""


async def _audit_destinations(
    db: Store, policy: AddressPolicy, *, task_status: trio.TaskStatus[None]
) -> None:
    """Say once how many active schedules the address policy refuses (one short read,
    then host names resolved off the critical path)."""
    task_status.started()
    report(await refused_destinations(await db.read(active_targets), policy))


def delivery_client(settings: Settings, policy: AddressPolicy) -> DeliveryClient:
    """The appliance's one delivery client (the engine's, and the dedupe test's)."""
    return DeliveryClient(
        policy,
        max_per_host=settings.max_in_flight_per_host,
        max_rate_per_host=settings.max_rate_per_host,
    )


def stream_limits(settings: Settings) -> StreamLimits:
    """Open live streams at most, per key, per session, per tenant and in all."""
    return StreamLimits(
        per_key=settings.max_streams_per_key,
        per_session=settings.max_streams_per_session,
        per_tenant=settings.max_streams_per_tenant,
        per_process=settings.max_streams,
    )


def engine_config(settings: Settings) -> EngineConfig:
    """The appliance's engine: every service, limits from the settings. On PostgreSQL the
    planner and dispatcher also wake every ``replica_poll_ms``: other replicas create work
    that no nudge in this process announces (docs/scale-out.md)."""
    dispatch = DispatchConfig(
        concurrency=settings.dispatch_concurrency,
        tenant_cap=settings.tenant_in_flight_cap,
        user_agent=USER_AGENT,
        breaker=None
        if settings.breaker_failures == 0
        else BreakerConfig(threshold=settings.breaker_failures),
    )
    planner = PlannerConfig()
    if settings.uses_postgres:
        poll_s = settings.replica_poll_ms / 1000
        dispatch = replace(dispatch, max_sleep_s=poll_s)
        planner = replace(planner, max_sleep_s=poll_s)
    return EngineConfig(
        leadership=LeadershipConfig() if settings.uses_postgres else None,
        planner=planner,
        dispatch=dispatch,
        pruner=PrunerConfig(retention_ms=settings.retention_days * 86_400_000),
        checkpointer=CheckpointerConfig(),
        notifier=NotifierConfig(user_agent=USER_AGENT),
        liveness=LivenessConfig(),
        backups=None
        if settings.backup_every_hours == 0
        else BackupConfig(
            every_ms=settings.backup_every_hours * 3_600_000,
            keep=settings.backup_keep,
            folder=settings.backups_path,
        ),
    )


def _import_web_stack() -> None:
    import hypercorn.trio  # noqa: F401
    import quart_trio  # noqa: F401

    import appliance.api.app
    import appliance.api.serving
    import appliance.ui.app  # noqa: F401


async def _serve_http(
    app: QuartTrio, settings: Settings, stop: trio.Event, *, task_status: trio.TaskStatus[list[str]]
) -> None:
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


async def _check(
    db: Store, incarnation: str, clock: WallClock, *, task_status: trio.TaskStatus[None]
) -> None:
    """The database check, beside the services (it reads the whole file); recorded on the
    incarnation when it passes (the operator's "last integrity check")."""
    task_status.started()
    started = trio.current_time()
    await db.check()
    await db.write(record_check, incarnation_id=incarnation, now=clock.now_ms())
    log.info("database check passed in %.1f s", trio.current_time() - started)
