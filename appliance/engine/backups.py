"""Scheduled backups, run by the appliance itself when ``backup_every_hours`` is set
(docs/operations.md, "Backup and restore").

Every ``every`` after the last recorded backup (whoever took it: this service or
``steeple backup``), a checked snapshot goes to ``folder`` as ``steeple-<UTC time>.db``,
the oldest beyond ``keep`` dated files there are deleted, and the record that ``doctor``,
``status`` and ``steeple_backup_last_success_timestamp_seconds`` read is updated. The
snapshot runs in a worker thread on a connection of its own (one ``VACUUM INTO``: it never
blocks the writer). A failed backup is logged and tried again after ``retry_s``; it never
stops the appliance. Sleeps are bounded, so a wall-clock jump delays nothing for long.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import trio

from appliance.clock import WallClock
from appliance.errors import StoreError
from appliance.store.infra.snapshot import backup_into, last_backup, prune_dated

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupConfig:
    every_ms: int
    keep: int
    folder: Path
    retry_s: float = 600.0
    max_sleep_s: float = 60.0


class Backups:
    def __init__(self, *, db_path: Path, clock: WallClock, config: BackupConfig) -> None:
        self._db_path = db_path
        self._clock = clock
        self._config = config

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            wait_ms = self.due_in_ms()
            if wait_ms > 0:
                await trio.sleep(min(wait_ms / 1000, self._config.max_sleep_s))
                continue
            if not await self.run_once():
                await trio.sleep(self._config.retry_s)

    def due_in_ms(self) -> int:
        last = last_backup(self._db_path.parent)
        if last is None:
            return 0
        return last.at_ms + self._config.every_ms - self._clock.now_ms()

    async def run_once(self) -> bool:
        """One backup and the pruning after it; False (logged) if it failed."""
        self._config.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        now = self._clock.now_ms()
        try:
            made = await trio.to_thread.run_sync(
                lambda: backup_into(self._db_path, self._config.folder, now_ms=now)
            )
        except (StoreError, OSError) as exc:
            log.error("scheduled backup failed (retrying in %.0f s): %s", self._config.retry_s, exc)
            return False
        pruned = prune_dated(self._config.folder, keep=self._config.keep)
        log.info(
            "backup written: %s (%d bytes)%s",
            made.path,
            made.bytes,
            f"; removed {len(pruned)} older" if pruned else "",
        )
        return True
