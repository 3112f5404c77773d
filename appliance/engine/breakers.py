"""The dispatcher's circuit breakers, one per origin, in this process's memory: the pure
rules are :mod:`appliance.core.breaker`'s; this keeps the states of origins that are not
closed, writes the events of an opened or closed breaker
(:func:`appliance.store.breaker.announce_breaker`) and, on closing, makes the runs that
waited due. A restart starts every origin closed (their waiting runs go at their due
time, the next probe instant).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from appliance.clock import WallClock
from appliance.core import breaker
from appliance.core.breaker import BreakerConfig, OriginState
from appliance.core.events import EventType
from appliance.core.instants import format_instant
from appliance.core.retry import TransportFailure
from appliance.store.breaker import announce_breaker, release_waiting
from appliance.store.claims import ClaimedRun
from appliance.store.completions import Completion
from appliance.store.infra.backend import Store

log = logging.getLogger(__name__)


class Breakers:
    def __init__(
        self,
        config: BreakerConfig,
        db: Store,
        clock: WallClock,
        released: Callable[[], None] = lambda: None,
    ) -> None:
        self._config = config
        self._released = released  # runs became due: wake the claim loop
        self._db = db
        self._clock = clock
        self._states: dict[str, OriginState] = {}  # origins not closed

    def state(self, origin: str) -> OriginState:
        return self._states.get(origin, breaker.CLOSED)

    def admit(self, origin: str) -> int | None:
        """None: send now; otherwise the instant the run waits until."""
        state = self._states.get(origin, breaker.CLOSED)
        wait_until, state = breaker.admit(state, now=self._clock.now_ms())
        self._keep(origin, state)
        return wait_until

    async def record(self, origin: str, run: ClaimedRun, completion: Completion) -> None:
        config = self._config
        before = self._states.get(origin, breaker.CLOSED)
        failure = None if completion.failure_class is None else TransportFailure(
            completion.failure_class
        )  # fmt: skip
        if completion.http_status is None and failure is None:  # Steeple's fault: no news
            self._keep(origin, replace(before, probing=False))
            return
        now = self._clock.now_ms()
        after, change = breaker.record(
            before,
            failed=breaker.is_failure(completion.http_status, failure),
            tenant_id=run.tenant_id,
            now=now,
            config=config,
        )
        self._keep(origin, after)
        if change is breaker.Change.OPENED:
            assert after.open_until is not None
            log.warning("circuit breaker of %s opened after %d failures", origin, after.failures)
            await self._db.write(
                announce_breaker, tenant_ids=after.tenants, type=EventType.BREAKER_OPENED,
                data={"origin": origin, "failures": after.failures,
                      "probe_at": format_instant(after.open_until)},
                now=now,
            )  # fmt: skip
        elif change is breaker.Change.CLOSED:
            log.info("circuit breaker of %s closed: its probe succeeded", origin)
            await self._db.write(
                announce_breaker, tenant_ids=before.tenants, type=EventType.BREAKER_CLOSED,
                data={"origin": origin}, now=now,
            )  # fmt: skip
            if await self._db.write(release_waiting, origin=origin, now=now):
                self._released()

    def _keep(self, origin: str, state: OriginState) -> None:
        if state == breaker.CLOSED:
            self._states.pop(origin, None)
        else:
            self._states[origin] = state
