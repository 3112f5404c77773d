"""The dispatcher: claims due runs, delivers them under leases, records the outcome fenced.

Rules (ADR 0033 "Claim" and "Leases, heartbeats, fencing"; ADR 0032 "Outcomes"):

- At most ``concurrency`` deliveries in flight. A delivery holds its slot while its
  request is out; the slot is free again as soon as the answer (or failure) is in, and the
  outcome is recorded beside the next claim: the claim loop is woken before the outcome is
  handed to the store (``write_batched``), and the claim is written with
  ``write_after_batched``, which promises it sees every batched write queued before it
  (:meth:`appliance.store.infra.database.Database.write_after_batched`: on SQLite the
  claim rides in the outcomes' group commit, after them; docs/adr/0033, "Claim"), so it
  counts their runs as finished. Until its outcome is committed the run still holds its
  lease (the reaper spares it, drain waits for it). Claims take only free slots, in one
  statement (:func:`appliance.store.claims.claim_runs`), and only once at least
  ``claim_batch`` slots are free (default a quarter of ``concurrency``): under load, one
  claim per freed slot would cost a transaction per delivery (several times the CPU per
  run of a claim of 32: bench/HISTORY.md, "Latest figures — 2026-11-29"). Work that is
  due still waits at most for that many of the
  deliveries in flight to finish.
- Claims are fair between tenants (the claim's rules are in :mod:`appliance.store.claims`),
  and no tenant has more than ``tenant_cap`` deliveries in flight: one tenant's slow
  receivers leave the other slots to the other tenants. A freed slot of a tenant held
  back by its cap wakes the claim loop only once that tenant has a claim's worth of room
  (or others have due runs), so a busy tenant's runs are claimed in batches too.
- The dispatcher sleeps until the earliest ``due_at`` of a claimable run, a nudge (the
  planner materialised runs, the API changed something, a delivery freed a slot) or
  ``max_sleep_s`` — never on a fixed poll.
- A heartbeat every ``heartbeat_ms`` renews every lease this incarnation holds, in one
  ``UPDATE``. Each delivery runs in a cancel scope whose deadline is the earlier of its own
  ``timeout_seconds`` and *last confirmed renewal + lease − margin*; each confirmed
  renewal moves the live deadlines forward. So a live executor never outlives its lease:
  when renewals fail, deliveries are cancelled before their leases can lapse, and nothing
  new is claimed until a renewal succeeds again. A lease the heartbeat's UPDATE could not
  renew because it had already expired in wall-clock terms (the wall clock stepped past
  it) cuts its delivery short at once: the reaper may be taking the run back. An attempt
  cut short for its lease is recorded ``abandoned`` and decided as the reaper's reclaim
  would decide it (charged, due again at once): the executor gave the attempt up, the
  receiver did not time out, so it does not wait the minute a ``deadline`` failure waits.
- One timeout bounds an attempt: the schedule's ``timeout_seconds`` (the cancel scope
  above, lease renewals permitting). The delivery client has no timeout of its own, so a
  receiver may take all of it; running out is a ``deadline`` failure.
- Each attempt is built and signed immediately before it is sent (``signed_at`` from the
  injected wall clock), classified, and decided by :mod:`appliance.core.retry` (the random
  factor comes from an injectable ``random.Random``), in :mod:`appliance.engine.outcomes`.
- The outcome is written fenced on the lease token: if the lease was taken away meanwhile,
  the attempt is recorded ``stale`` and the run is left to whoever holds it now. The
  outcomes that finish together are written in one batch (one ``executemany`` per
  statement, :func:`appliance.store.completions.complete_runs`) in one group commit; one
  that cannot be written fails alone.
- A 410 Gone fails the run (reason ``gone``) and pauses the schedule; a blocked destination
  fails it without retry.
- With a circuit breaker configured (:mod:`appliance.core.breaker`, one per origin, in this
  process's memory), a run claimed while its origin's breaker is open is not sent: it is
  put back uncharged until the next probe (:func:`appliance.store.breaker.defer_run`).
  Each attempt's outcome feeds its origin's breaker; opening and closing are events.
- One boundary per delivery catches ``Exception`` (a bug, or a tenant with no signing
  secret left): it is logged with its traceback and counts as a retryable attempt, so the
  run is never silently lost and the service goes on. A failed *store* write (claim or
  completion) is not caught: the appliance stops loudly, and the next boot reclaims.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Protocol

import trio

from appliance.clock import WallClock
from appliance.core.breaker import BreakerConfig, origin_of
from appliance.core.delivery import RESEND_HEADER, build_request
from appliance.core.retry import Verdict
from appliance.core.runs import AttemptOutcome
from appliance.engine.breakers import Breakers
from appliance.engine.delivery import Exchange, SendResult, send
from appliance.engine.in_flight import InFlight
from appliance.engine.outcomes import classify, completion, given_up, timed_out
from appliance.engine.wakeup import Wakeup
from appliance.errors import StoreError
from appliance.store.breaker import defer_run
from appliance.store.claims import ClaimedRun, claim_runs
from appliance.store.claims import renew_leases as store_renew_leases
from appliance.store.completions import Completion, Finished, complete_runs
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchConfig:
    concurrency: int = 32  # deliveries in flight
    claim_batch: int | None = None  # claim only when this many slots are free (None: 1/4)
    tenant_cap: int | None = None  # deliveries in flight per tenant (None: no cap)
    lease_ms: int = 30_000  # a claim's lease, renewed by heartbeats
    heartbeat_ms: int = 10_000
    margin_ms: int = 2_000  # a delivery is cancelled this long before its lease could lapse
    max_sleep_s: float = 60.0  # never sleep longer: guards against wall-clock jumps
    user_agent: str = "Steeple"
    breaker: BreakerConfig | None = None  # per-origin circuit breaker (None: off)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.claim_batch is not None and not 1 <= self.claim_batch <= self.concurrency:
            raise ValueError(
                f"claim_batch must be 1–{self.concurrency} (the concurrency),"
                f" not {self.claim_batch}"
            )
        if self.tenant_cap is not None and self.tenant_cap < 1:
            raise ValueError(f"tenant_cap must be at least 1, not {self.tenant_cap}")

    @property
    def min_claim(self) -> int:
        """Free slots needed before a claim."""
        return self.claim_batch if self.claim_batch is not None else max(1, self.concurrency // 4)


class RenewLeases(Protocol):
    """The heartbeat's store call (:func:`appliance.store.claims.renew_leases`);
    a seam so tests can make renewals fail."""

    def __call__(
        self, conn: Connection, /, *, owner: str, now: int, lease_ms: int
    ) -> frozenset[str]: ...


class Dispatcher:
    """The delivery service: a short loop around :meth:`run_once`, plus the heartbeat."""

    def __init__(
        self,
        *,
        db: Store,
        clock: WallClock,
        client: Exchange,
        incarnation_id: str,
        wakeup: Wakeup,
        config: DispatchConfig,
        rand: random.Random | None = None,
        renew_leases: RenewLeases = store_renew_leases,
    ) -> None:
        self._db = db
        self._clock = clock
        self._client = client
        self._owner = incarnation_id
        self._wakeup = wakeup
        self._config = config
        self._rand = rand or random.Random()
        self._renew = renew_leases
        self._live: dict[str, InFlight] = {}  # by lease token: one run may be claimed again
        self._recording: dict[str, InFlight] = {}  # outcome handed to the writer, not committed
        self._renewals_ok = True
        self._draining = False
        self._emptied = trio.Event()
        self._nursery: trio.Nursery | None = None
        # What the last claim left behind: tenants with due runs held back by their cap,
        # and the earliest due_at of anyone else's (None: nothing claimable).
        self._capped: frozenset[str] = frozenset()
        self._next_due_at: int | None = None
        self._breakers = (
            None
            if config.breaker is None
            else Breakers(config.breaker, db, clock, released=wakeup.nudge)
        )

    @property
    def in_flight(self) -> int:
        """Deliveries claimed and not yet recorded (their request out, or their outcome
        being written)."""
        return len(self._live) + len(self._recording)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._heartbeat)
            task_status.started()
            while True:
                deadline = await self.run_once()
                await self._wakeup.wait(deadline)

    async def drain(self) -> None:
        """Stop claiming and wait until every delivery in flight has been recorded."""
        self._draining = True
        if self.in_flight:
            self._emptied = trio.Event()
            await self._emptied.wait()

    async def run_once(self) -> float:
        """Claim due runs into free slots and start delivering them. Returns the trio
        deadline of the next claim (earliest due_at, or max sleep when slots are full)."""
        free = self._config.concurrency - len(self._live)
        if self._draining or not self._renewals_ok or free < self._config.min_claim:
            return trio.current_time() + self._config.max_sleep_s  # a nudge frees us
        assert self._nursery is not None, "run_once runs inside run()"
        now, claimed_at = self._clock.now_ms(), trio.current_time()
        batch = await self._db.write_after_batched(  # sees the outcomes queued before it
            claim_runs,
            owner=self._owner,
            now=now,
            lease_ms=self._config.lease_ms,
            limit=free,
            tenant_cap=self._config.tenant_cap,
        )
        self._capped, self._next_due_at = batch.capped, batch.next_due_at
        for run in batch.runs:
            live = InFlight(run, claimed_at=claimed_at, lease_s=self._lease_budget_s())
            self._live[run.lease_token] = live
            self._nursery.start_soon(self._deliver, live)
        if len(batch.runs) >= free or batch.next_due_at is None:
            return trio.current_time() + self._config.max_sleep_s
        wait_s = max(batch.next_due_at - now, 0) / 1000
        return trio.current_time() + min(wait_s, self._config.max_sleep_s)

    def _lease_budget_s(self) -> float:
        return (self._config.lease_ms - self._config.margin_ms) / 1000

    def _slot_freed(self, run: ClaimedRun) -> None:
        """Wake the claim loop for a freed slot, unless it is the slot of a tenant held
        back by its cap that has not yet room for a claim's worth while nobody else has
        due runs: then the claim would take one run per finished delivery."""
        cap = self._config.tenant_cap
        if cap is not None and run.tenant_id in self._capped and not self._others_due():
            in_flight = sum(
                1 for live in self._live.values() if live.run.tenant_id == run.tenant_id
            )
            if cap - in_flight < min(self._config.min_claim, cap):
                return
        self._wakeup.nudge()

    def _others_due(self) -> bool:
        return self._next_due_at is not None and self._next_due_at <= self._clock.now_ms()

    # --- one delivery --------------------------------------------------------------------

    async def _deliver(self, live: InFlight) -> None:
        try:
            origin = "" if self._breakers is None else origin_of(live.run.target_url)
            wait_until = None if self._breakers is None else self._breakers.admit(origin)
            if wait_until is not None:
                await self._db.write(
                    defer_run, run=live.run, due_at=wait_until, origin=origin,
                    now=self._clock.now_ms(),
                )  # fmt: skip
                return
            completion = await self._attempt(live)
            finished = Finished(live.run, completion, self._clock.now_ms())
            self._hand_over(live)  # no checkpoint before the write is queued (module rules)
            applied = await self._db.write_batched(complete_runs, finished)
            if not applied:
                log.warning(
                    "run %s attempt %d finished after its lease was taken away: recorded stale",
                    live.run.run_id,
                    live.run.attempt,
                )
            if self._breakers is not None:
                await self._breakers.record(origin, live.run, completion)
        finally:
            token = live.run.lease_token
            if self._live.pop(token, None) is not None:
                self._slot_freed(live.run)
            self._recording.pop(token, None)
            if not self.in_flight:
                self._emptied.set()

    def _hand_over(self, live: InFlight) -> None:
        """The request is done: free its slot (the claim loop may run beside the outcome's
        write) while the run stays held until its outcome is committed."""
        token = live.run.lease_token
        self._recording[token] = self._live.pop(token)
        self._slot_freed(live.run)

    async def _attempt(self, live: InFlight) -> Completion:
        run = live.run
        started = trio.current_time()
        signed_at: int | None = None
        try:
            signed_at = self._clock.now_ms() // 1000
            request = build_request(
                target_url=run.target_url,
                body=run.body,
                content_type=run.content_type,
                tenant_headers=run.headers,
                schedule_id=run.schedule_id,
                run_id=run.run_id,
                attempt=run.attempt,
                scheduled_for_ms=run.scheduled_for,
                idempotency_key=run.idempotency_key,
                secrets=run.secrets,
                signed_at_s=signed_at,
                user_agent=self._config.user_agent,
                marks=() if run.resend_of is None else ((RESEND_HEADER, run.resend_of),),
                method=run.method,
            )
            with live.scope:
                result = await send(self._client, request)
            if live.scope.cancelled_caught:
                if live.lapsed or live.lease_deadline < live.own_deadline:
                    return given_up(live, started, signed_at=signed_at, clock=self._clock)
                result = timed_out(live, started)
        except Exception as exc:  # the per-delivery boundary (see the module docstring)
            log.exception("run %s attempt %d failed inside Steeple", run.run_id, run.attempt)
            verdict = Verdict(outcome=AttemptOutcome.RETRYABLE)
            error = f"internal error: {type(exc).__name__}: {exc}"
            failed = SendResult.failed(error, started=started, failure=None)
            return self._complete(run, verdict, failed, signed_at=None)
        verdict = classify(run, result, clock=self._clock)
        return self._complete(run, verdict, result, signed_at=signed_at)

    def _complete(
        self, run: ClaimedRun, verdict: Verdict, result: SendResult, *, signed_at: int | None
    ) -> Completion:
        return completion(
            run, verdict, result, signed_at=signed_at, clock=self._clock, rand=self._rand.random()
        )

    # --- heartbeat -------------------------------------------------------------------------

    def held_leases(self) -> frozenset[str]:
        """The lease tokens of deliveries in flight whose lease has not lapsed by the
        monotonic clock (the reaper spares them: :mod:`appliance.engine.reaper`)."""
        now = trio.current_time()
        return frozenset(
            token
            for held in (self._live, self._recording)
            for token, live in held.items()
            if not live.lapsed and now < live.lease_deadline
        )

    async def _heartbeat(self) -> None:
        while True:
            await trio.sleep(self._config.heartbeat_ms / 1000)
            await self.renew_once()

    async def renew_once(self) -> None:
        """Renew every lease this incarnation holds; on success move live deadlines
        forward, on failure stop claiming until a renewal succeeds."""
        if self.in_flight:
            # claimed (committed) before this renewal
            covered = [*self._live.values(), *self._recording.values()]
            started, now = trio.current_time(), self._clock.now_ms()
            try:
                renewed = await self._db.write(
                    self._renew, owner=self._owner, now=now, lease_ms=self._config.lease_ms
                )
            except StoreError:
                log.exception("lease renewal failed: claiming nothing new until it works")
                self._renewals_ok = False
                return
            for live in covered:  # the rows say which leases are still ours
                if live.run.lease_token in renewed:
                    live.renewed(started + self._lease_budget_s())
                else:
                    live.lease_lapsed()
        # With nothing in flight there is nothing to lose: claiming may resume.
        if not self._renewals_ok:
            self._renewals_ok = True
            self._wakeup.nudge()
