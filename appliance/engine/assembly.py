"""The engine assembled: every scheduling service wired in one place (docs/architecture.md,
"One process").

The appliance's runtime, the engine tests and the chaos executor all build the engine
with :func:`build_engine`, so a service is added or rewired once. The callers pass what
they build differently — the delivery client (a real pool, or a test's fake), the
dispatch limits, the clock, the incarnation — and get an :class:`Engine`.

:meth:`Engine.run` starts the services in dependency order (planner, dispatcher with its
heartbeat, reaper, pruner, checkpointer, notifier, backups, liveness), each with
``nursery.start``, inside a nursery of its own that owns every task they start: a service
that crashes cancels the others and its error reaches the caller. Nothing is started
fire-and-forget.

Wake-ups: the planner nudges the dispatcher when it materialised runs; the reaper nudges
it when it took runs back; :meth:`Engine.nudge` (the API's, after a schedule changed)
wakes the planner and the dispatcher.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from appliance.clock import WallClock
from appliance.engine.backups import BackupConfig, Backups
from appliance.engine.checkpointer import Checkpointer, CheckpointerConfig
from appliance.engine.delivery import Exchange
from appliance.engine.dispatcher import DispatchConfig, Dispatcher, RenewLeases
from appliance.engine.leadership import Leadership, LeadershipConfig, always
from appliance.engine.liveness import Liveness, LivenessConfig
from appliance.engine.notifier import Notifier, NotifierConfig
from appliance.engine.planner import Planner
from appliance.engine.pruner import Pruner, PrunerConfig
from appliance.engine.reaper import Reaper, ReaperConfig
from appliance.engine.wakeup import Wakeup
from appliance.store.claims import renew_leases as store_renew_leases
from appliance.store.infra.backend import Store
from appliance.store.infra.database import Database
from appliance.store.usecases.plan_pass import PlannerConfig


class Service(Protocol):
    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """Which services run, and how. ``None`` leaves a service out: a chaos racer that only
    delivers runs no planner; tests keep their history (no pruner) and leave the WAL to
    SQLite's own checkpoints."""

    dispatch: DispatchConfig
    planner: PlannerConfig | None = field(default_factory=PlannerConfig)
    reaper: ReaperConfig | None = field(default_factory=ReaperConfig)
    pruner: PrunerConfig | None = None
    checkpointer: CheckpointerConfig | None = None
    notifier: NotifierConfig | None = field(default_factory=NotifierConfig)
    backups: BackupConfig | None = None  # scheduled backups (operators opt in)
    liveness: LivenessConfig | None = None  # the appliance's last-seen mark (restart reports)
    leadership: LeadershipConfig | None = None  # replicas: planner, reaper, pruner on one


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    """The wired services of one incarnation. Run with :meth:`run`; stop by cancelling."""

    incarnation_id: str
    planner: Planner | None
    dispatcher: Dispatcher
    reaper: Reaper | None
    pruner: Pruner | None
    checkpointer: Checkpointer | None
    notifier: Notifier | None
    leadership: Leadership | None
    planner_wakeup: Wakeup
    backups: Backups | None = None
    liveness: Liveness | None = None
    dispatcher_wakeup: Wakeup

    @property
    def services(self) -> tuple[Service, ...]:
        """In start order: the dispatcher only claims what the planner made due."""
        wired = (
            self.leadership,  # first: the others ask it whether they lead
            self.planner,
            self.dispatcher,
            self.reaper,
            self.pruner,
            self.checkpointer,
            self.notifier,
            self.backups,
            self.liveness,
        )
        return tuple(service for service in wired if service is not None)

    def nudge(self) -> None:
        """Something changed (a schedule was created, edited, resumed, triggered): plan and
        claim again now rather than at the next deadline."""
        self.planner_wakeup.nudge()
        self.dispatcher_wakeup.nudge()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every service, report started, and run until cancelled."""
        async with trio.open_nursery() as nursery:
            for service in self.services:
                await nursery.start(service.run)
            task_status.started()


def build_engine(
    *,
    db: Store,
    clock: WallClock,
    client: Exchange,
    incarnation_id: str,
    config: EngineConfig,
    rand: random.Random | None = None,
    renew_leases: RenewLeases = store_renew_leases,
) -> Engine:
    """Wire the services of ``config`` for ``incarnation_id``. ``rand`` (the retry
    jitter's randomness) and ``renew_leases`` (the heartbeat's store call) are seams for
    tests; production passes neither."""
    planner_wakeup, dispatcher_wakeup, reaper_wakeup = Wakeup(), Wakeup(), Wakeup()
    leadership = _leadership(
        db, clock, incarnation_id, config.leadership, planner_wakeup, reaper_wakeup
    )
    leads = always if leadership is None else leadership.leads
    dispatcher = Dispatcher(
        db=db,
        clock=clock,
        client=client,
        incarnation_id=incarnation_id,
        wakeup=dispatcher_wakeup,
        config=config.dispatch,
        rand=rand,
        renew_leases=renew_leases,
    )
    return Engine(
        incarnation_id=incarnation_id,
        leadership=leadership,
        planner=_planner(db, clock, config.planner, planner_wakeup, dispatcher_wakeup, leads),
        dispatcher=dispatcher,
        reaper=None
        if config.reaper is None
        else Reaper(
            db=db,
            clock=clock,
            on_reclaimed=dispatcher_wakeup.nudge,
            config=config.reaper,
            wakeup=reaper_wakeup,
            held=dispatcher.held_leases,
            leads=leads,
        ),
        pruner=None
        if config.pruner is None
        else Pruner(db=db, clock=clock, config=config.pruner, leads=leads),
        checkpointer=None
        if config.checkpointer is None or not isinstance(db, Database)
        else Checkpointer(db=db, clock=clock, config=config.checkpointer),
        notifier=None
        if config.notifier is None
        else Notifier(db=db, clock=clock, client=client, config=config.notifier, rand=rand),
        planner_wakeup=planner_wakeup,
        dispatcher_wakeup=dispatcher_wakeup,
        backups=None  # a SQLite file's; PostgreSQL's backups are pg_dump's (docs/scale-out.md)
        if config.backups is None or not isinstance(db, Database)
        else Backups(db_path=db.sqlite_file, clock=clock, config=config.backups),
        liveness=None
        if config.liveness is None
        else Liveness(db=db, clock=clock, incarnation_id=incarnation_id, config=config.liveness),
    )


def _planner(
    db: Store,
    clock: WallClock,
    config: PlannerConfig | None,
    wakeup: Wakeup,
    dispatcher_wakeup: Wakeup,
    leads: Callable[[], bool],
) -> Planner | None:
    if config is None:
        return None
    return Planner(
        db=db,
        clock=clock,
        wakeup=wakeup,
        on_planned=dispatcher_wakeup.nudge,
        config=config,
        leads=leads,
    )


def _leadership(
    db: Store,
    clock: WallClock,
    incarnation_id: str,
    config: LeadershipConfig | None,
    *elected_wakes: Wakeup,
) -> Leadership | None:
    if config is None:
        return None

    def elected() -> None:
        for wakeup in elected_wakes:
            wakeup.nudge()

    return Leadership(
        db=db, clock=clock, incarnation_id=incarnation_id, on_elected=elected, config=config
    )
