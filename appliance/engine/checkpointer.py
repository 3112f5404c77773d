"""The checkpointer: a passive WAL checkpoint every ``interval_s`` (ADR 0033 "Storage").

SQLite checkpoints on its own only after a commit that grows the WAL past 1,000 pages, on
the committing connection — so a quiet appliance keeps its last writes in the WAL
indefinitely, and a long read snapshot can hold the file large. A passive checkpoint
never waits for readers or the writer; it runs between writes on the writer connection
(:meth:`appliance.store.infra.database.Database.checkpoint_wal`). Maintenance, not a poll:
nothing waits on it. ``/metrics`` shows when the last one ran and what it had to leave in
the WAL (:attr:`appliance.store.infra.database.Database.last_checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from appliance.clock import WallClock
from appliance.store.infra.database import Database


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointerConfig:
    interval_s: float = 60.0


class Checkpointer:
    def __init__(self, *, db: Database, clock: WallClock, config: CheckpointerConfig) -> None:
        self._db = db
        self._clock = clock
        self._config = config

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self._config.interval_s)
            await self._db.checkpoint_wal(now_ms=self._clock.now_ms())
