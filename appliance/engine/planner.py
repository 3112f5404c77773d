"""The planner service: turns each schedule's occurrences into run rows, exactly once, by
running passes (:func:`appliance.store.usecases.plan_pass.plan_once`, whose module states the rules
of a pass: cursors, catch-up, bounds). ADR 0033 "Planning" says why.

Rules of the service:

- It sleeps until the earliest cursor minus the lookahead, a nudge, or ``max_sleep_s`` (a
  guard against wall-clock jumps), and plans again at once when a pass hit a bound.
- It compares wall-clock progress with trio's monotonic clock on every loop: a divergence
  over ``clock_jump_ms`` is recorded as ``clock.jump_detected`` and logged, then planning
  carries on from the cursors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from appliance.clock import WallClock
from appliance.core.events import EventType
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.engine.leadership import always
from appliance.engine.wakeup import Wakeup
from appliance.store.events import SYSTEM_TENANT, append_event
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection
from appliance.store.usecases.plan_pass import PlannerConfig, PlanResult, plan_once

log = logging.getLogger(__name__)


def record_clock_jump(
    conn: Connection, *, wall_delta_ms: int, monotonic_delta_ms: int, now: int
) -> None:
    append_event(
        conn,
        tenant_id=SYSTEM_TENANT,
        type=EventType.CLOCK_JUMP_DETECTED,
        now=now,
        data={
            "wall_delta_ms": wall_delta_ms,
            "monotonic_delta_ms": monotonic_delta_ms,
            "divergence_ms": wall_delta_ms - monotonic_delta_ms,
        },
    )


class Planner:
    """The planning service: a short loop around :meth:`run_once`."""

    def __init__(
        self,
        *,
        db: Store,
        clock: WallClock,
        wakeup: Wakeup,
        on_planned: Callable[[], None],
        config: PlannerConfig,
        leads: Callable[[], bool] = always,
    ) -> None:
        self._db = db
        self._leads = leads  # replicas: only the leader plans (engine/leadership.py)
        self._clock = clock
        self._wakeup = wakeup
        self._on_planned = on_planned
        self._config = config
        self._occurrences = OccurrenceCache()  # used only inside its passes' transactions
        self._last_seen: tuple[int, float] | None = None  # (wall ms, trio seconds)
        # Set after the first pass that left nothing over: every occurrence up to the
        # start has its row (the restart's downtime report waits for it).
        self.caught_up = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            deadline = await self.run_once()
            await self._wakeup.wait(deadline)

    async def run_once(self) -> float:
        """Check the clock, plan one pass, nudge the dispatcher if runs appeared. Returns
        the trio deadline for the next pass."""
        await self._check_clock()
        if not self._leads():
            return trio.current_time() + self._config.max_sleep_s
        now = self._clock.now_ms()
        result = await self._db.write(
            plan_once, now=now, config=self._config, occurrences=self._occurrences
        )
        if result.materialised:
            self._on_planned()
        if not result.more:
            self.caught_up.set()
        return trio.current_time() + self._sleep_s(result, now)

    def _sleep_s(self, result: PlanResult, now: int) -> float:
        if result.more:
            return 0.0
        if result.next_fire_at is None:
            return self._config.max_sleep_s
        wait_ms = result.next_fire_at - self._config.lookahead_ms - now
        return min(max(wait_ms, 0) / 1000, self._config.max_sleep_s)

    async def _check_clock(self) -> None:
        wall, mono = self._clock.now_ms(), trio.current_time()
        previous, self._last_seen = self._last_seen, (wall, mono)
        if previous is None:
            return
        wall_delta, mono_delta = wall - previous[0], round((mono - previous[1]) * 1000)
        if abs(wall_delta - mono_delta) > self._config.clock_jump_ms:
            log.warning(
                "wall clock jumped by %+d ms; re-planning from the cursors", wall_delta - mono_delta
            )
            await self._db.write(
                record_clock_jump,
                wall_delta_ms=wall_delta,
                monotonic_delta_ms=mono_delta,
                now=wall,
            )
