"""The reaper: takes back runs whose lease lapsed (ADR 0033 "Reclaim").

A lease lapses when its executor stopped renewing it — a stuck process, a wall-clock
jump, or (in a future multi-process deployment) a dead replica. The reaper returns such
runs to ``retry_wait`` due now, or ``failed`` (exhausted) when that was their last attempt,
and marks the open attempt ``abandoned`` (charged to the run's budget, unlike the boot
reclaim's: here the process is alive and the attempt is what got stuck). Rows claimed longer
ago than ``ceiling_ms`` are reclaimed whatever their heartbeats say: no attempt may run
that long (the longest delivery deadline is 300 s), so such a row was orphaned.

Leases this process's dispatcher still holds by the monotonic clock (``held``) are spared
whatever the wall clock says: after a forward wall-clock step they look lapsed while their
deliveries run, and reclaiming one would send the run again beside its live attempt until
the next heartbeat. The heartbeat decides them (a lease it cannot renew is given up,
``abandoned``, and the run is due at once); a stuck loop stops the reaper as well, and its
deadlines, being monotonic, have passed by the time either runs again.

The service sleeps until the earliest lease expiry (just after it: a lease is expired
when ``lease_expires_at < now``), a nudge, or ``max_sleep_s``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import trio

from appliance.clock import WallClock
from appliance.engine.leadership import always
from appliance.engine.wakeup import Wakeup
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection
from appliance.store.usecases.reclaim import earliest_lease_expiry, reclaim_expired

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaperConfig:
    batch: int = 500  # rows reclaimed per pass
    ceiling_ms: int = 600_000  # a claim older than this is orphaned (> 300 s max deadline)
    max_sleep_s: float = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ReapResult:
    reclaimed: int
    more: bool  # the batch was full: reap again at once
    next_expiry: int | None  # earliest lease expiry left (epoch ms)


def reap_once(
    conn: Connection, *, now: int, config: ReaperConfig, spare: frozenset[str] = frozenset()
) -> ReapResult:
    """One reaper pass inside the caller's write transaction; the leases in ``spare`` are
    this process's live ones (see the module's rules)."""
    reclaimed = reclaim_expired(
        conn, now=now, ceiling_ms=config.ceiling_ms, limit=config.batch, spare=spare
    )
    return ReapResult(
        reclaimed=reclaimed,
        more=reclaimed >= config.batch,
        next_expiry=earliest_lease_expiry(conn, spare=spare),
    )


class Reaper:
    """The reaping service: a short loop around :meth:`run_once`."""

    def __init__(
        self,
        *,
        db: Store,
        clock: WallClock,
        on_reclaimed: Callable[[], None],
        config: ReaperConfig | None = None,
        wakeup: Wakeup | None = None,
        held: Callable[[], frozenset[str]] = frozenset,
        leads: Callable[[], bool] = always,
    ) -> None:
        self._db = db
        self._leads = leads  # replicas: only the leader reaps (engine/leadership.py)
        self._clock = clock
        self._on_reclaimed = on_reclaimed
        self._held = held
        self._config = config or ReaperConfig()
        self._wakeup = wakeup or Wakeup()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            deadline = await self.run_once()
            await self._wakeup.wait(deadline)

    async def run_once(self) -> float:
        """Reclaim expired leases; nudge the dispatcher if any. Returns the next deadline."""
        if not self._leads():
            return trio.current_time() + self._config.max_sleep_s
        now = self._clock.now_ms()
        result = await self._db.write(reap_once, now=now, config=self._config, spare=self._held())
        if result.reclaimed:
            log.warning("reclaimed %d runs whose lease lapsed", result.reclaimed)
            self._on_reclaimed()
        return trio.current_time() + self._sleep_s(result, now)

    def _sleep_s(self, result: ReapResult, now: int) -> float:
        if result.more:
            return 0.0
        if result.next_expiry is None:
            return self._config.max_sleep_s
        wait_ms = result.next_expiry + 1 - now  # expired means strictly before now
        return min(max(wait_ms, 0) / 1000, self._config.max_sleep_s)
