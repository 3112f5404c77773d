"""The pruner: deletes finished history older than the retention period, in small batches
(rules in :mod:`appliance.store.retention`). Hourly maintenance, not a poll: nothing waits
on it, and a late pass only keeps rows a little longer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import trio

from appliance.clock import WallClock
from appliance.engine.leadership import always
from appliance.store.infra.backend import Store
from appliance.store.notifications import prune_notifications
from appliance.store.request_keys import prune_request_keys
from appliance.store.retention import Pruned, prune

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrunerConfig:
    retention_ms: int
    batch: int = 1_000  # rows per transaction, so the writer is never held long
    interval_s: float = 3_600.0


class Pruner:
    def __init__(
        self,
        *,
        db: Store,
        clock: WallClock,
        config: PrunerConfig,
        leads: Callable[[], bool] = always,
    ) -> None:
        self._db = db
        self._leads = leads  # replicas: only the leader prunes (engine/leadership.py)
        self._clock = clock
        self._config = config

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self.run_once()
            await trio.sleep(self._config.interval_s)

    async def run_once(self) -> int:
        """Prune until a batch comes back short; returns the rows deleted (0 on a replica
        that does not lead)."""
        if not self._leads():
            return 0
        total = await self._db.write(prune_request_keys, now=self._clock.now_ms())
        while True:
            pruned: Pruned = await self._db.write(
                prune,
                now=self._clock.now_ms(),
                retention_ms=self._config.retention_ms,
                limit=self._config.batch,
            )
            total += pruned.rows
            if pruned.runs < self._config.batch and pruned.events < self._config.batch:
                break
        cutoff = self._clock.now_ms() - self._config.retention_ms
        while True:
            deleted = await self._db.write(
                prune_notifications, before=cutoff, limit=self._config.batch
            )
            total += deleted
            if deleted < self._config.batch:
                break
        if total:
            log.info("pruned %d rows older than the retention period", total)
        return total
