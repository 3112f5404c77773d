"""Liveness: the incarnation marks itself seen every ``interval_s`` (one tiny write), so
the next start knows when a process that died without a clean end stopped, within one
interval (:mod:`appliance.engine.restarts` reports the downtime). Maintenance, not a poll:
nothing waits on it."""

from __future__ import annotations

from dataclasses import dataclass

import trio

from appliance.clock import WallClock
from appliance.store.incarnations import mark_seen
from appliance.store.infra.backend import Store


@dataclass(frozen=True, slots=True, kw_only=True)
class LivenessConfig:
    interval_s: float = 5.0  # the downtime a crash reports is exact to within this


class Liveness:
    def __init__(
        self, *, db: Store, clock: WallClock, incarnation_id: str, config: LivenessConfig
    ) -> None:
        self._db = db
        self._clock = clock
        self._incarnation_id = incarnation_id
        self._config = config

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self._config.interval_s)
            await self._db.write(
                mark_seen, incarnation_id=self._incarnation_id, now=self._clock.now_ms()
            )
