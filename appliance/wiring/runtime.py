"""The composition root: builds every part from the settings and runs them in one nursery.

Start order (docs/architecture.md, "One process"): data directory (created private, or
its modes tightened with one log line) → lock file → database (migrate) → incarnation (the
previous one read first) and boot-time reclaim → the engine
(:func:`appliance.engine.assembly.build_engine`: planner, dispatcher with heartbeats,
reaper, pruner, checkpointer, liveness mark), the restart's downtime report (once the
planner caught up: :mod:`appliance.engine.restarts`) and the database check
(``quick_check``, beside them: it reads the whole file, and a restart must not wait for
that before delivering) → the HTTP server (:mod:`appliance.wiring.http`). Every task is
started with ``nursery.start`` in the root nursery, which owns them all; the web app owns
none. A failed check stops the appliance like any store failure; so does a service that
crashes, loudly. SIGTERM/SIGINT: stop claiming, let in-flight deliveries finish within
the grace period, stop the server, record the incarnation's end, close the database. A
second signal during the drain stops at once (what is still in flight is reclaimed at the
next start).

Start-up failures are one line with the fix (:class:`~appliance.errors.SteepleError`):
a data directory this user cannot use, a port already in use, a lock held by another
appliance. At boot the appliance also says how many active schedules the address policy
now refuses (:mod:`appliance.engine.delivery.audit`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import trio

from appliance import __version__
from appliance.clock import SharedClock, SystemClock, WallClock
from appliance.core.addresses import AddressPolicy
from appliance.core.breaker import BreakerConfig
from appliance.core.lifecycle import Lifecycle
from appliance.engine.assembly import EngineConfig, build_engine
from appliance.engine.backups import BackupConfig
from appliance.engine.checkpointer import CheckpointerConfig
from appliance.engine.delivery import DeliveryClient
from appliance.engine.delivery.audit import refused_destinations, report
from appliance.engine.dispatcher import DispatchConfig
from appliance.engine.leadership import LeadershipConfig
from appliance.engine.liveness import LivenessConfig
from appliance.engine.notifier import NotifierConfig
from appliance.engine.pruner import PrunerConfig
from appliance.engine.restarts import report_restart
from appliance.settings.model import Settings
from appliance.store.events import latest_seq
from appliance.store.figures.operator import active_targets
from appliance.store.incarnations import (
    end_incarnation,
    previous_incarnation,
    record_check,
    register_incarnation,
)
from appliance.store.infra.backend import Store
from appliance.store.infra.snapshot import RestoreRecord, forget_restore, pending_restore
from appliance.store.usecases.plan_pass import PlannerConfig
from appliance.store.usecases.reclaim import reclaim_previous
from appliance.wiring import http, storage
from appliance.wiring.sdnotify import notify, watchdog_interval_s
from appliance.wiring.watchdog import pet_watchdog

log = logging.getLogger("steeple")

# The trio thread makes a socket syscall per send and receive, releasing the GIL each
# time, while worker threads run SQLite through apsw. Getting the GIL back can take a whole
# switch interval (CPython's default 5 ms) when a worker holds it: a convoy that idles the
# event loop. A shorter interval drains a burst sooner at the same CPU, and much shorter
# ones cost more in switching than they save (bench/HISTORY.md, "Latest figures — 2026-11-29").
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


async def _report_restart(
    settings: Settings,
    restored: RestoreRecord | None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    **report: Any,
) -> None:
    """The downtime report; a restore it reported is then forgotten (a start that dies
    before reporting leaves it for the next one)."""
    restored_at = None if restored is None else restored.at_ms
    task_status.started()
    await report_restart(restored_at=restored_at, **report)
    if restored is not None:
        log.info("the restored copy came from %s", restored.source)
        forget_restore(settings.data_dir)


async def _run(
    settings: Settings,
    clock: WallClock,
    policy: AddressPolicy,
    db: Store,
    task_status: trio.TaskStatus[Started],
) -> None:
    notify("STATUS=reclaiming runs left by an earlier process")
    started_at = clock.now_ms()
    events_at_start = await db.read(latest_seq)  # /metrics counts from here (core.lifecycle)
    incarnation = await db.write(register_incarnation, pid=os.getpid(), now=started_at)
    previous, reclaimed, restored = None, 0, None
    if not settings.uses_postgres:  # replicas: another one's runs are live, not left behind
        restored = pending_restore(settings.data_dir)
        previous = await db.read(previous_incarnation, incarnation_id=incarnation)
        reclaimed = await db.write(reclaim_previous, incarnation_id=incarnation, now=started_at)
    if reclaimed:
        log.warning("reclaimed %d runs left running by an earlier process", reclaimed)
    lifecycle = Lifecycle(events_at_start=events_at_start)
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
                    _report_restart,
                    settings,
                    restored,
                    db=db,
                    clock=clock,
                    previous=previous,
                    restarted_at=started_at,
                    reclaimed=reclaimed,
                    caught_up=None if engine.planner is None else engine.planner.caught_up,
                )
            )
        elif restored is not None:  # a copy no process ever ran on: nothing to report
            forget_restore(settings.data_dir)
        await nursery.start(_check, db, incarnation, clock)
        await nursery.start(_audit_destinations, db, policy)

        # The web stack loads in a worker thread while the engine already delivers: a
        # restart's first redelivery does not wait for it.
        await trio.to_thread.run_sync(http.import_web_stack)
        app, event_hub = http.build_web_app(
            settings,
            db=db,
            clock=clock,
            nudge=nudge,
            policy=policy,
            client=client,
            lifecycle=lifecycle,
        )
        await nursery.start(event_hub.run)
        stop_http = trio.Event()
        addresses = await nursery.start(http.serve_http, app, settings, stop_http)
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
