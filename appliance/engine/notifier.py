"""The notifier: delivers the failure-notification outbox (docs/receiver.md, "Failure
notifications"; the outbox's rules are in :mod:`appliance.store.notifications`).

Rules:

- Rows are claimed under a lease (``lease_ms``) that outlives an attempt
  (:data:`~appliance.core.notifications.ATTEMPT_TIMEOUT_S`, a cancel scope), so a live
  notifier never loses its row to a reclaim; a dead one's rows are claimed again once
  their leases lapse, and delivered again with the same idempotency key.
- Each attempt is built and signed immediately before it is sent, classified and decided
  by :mod:`appliance.core.retry` with
  :data:`~appliance.core.notifications.NOTIFICATION_POLICY`: 2xx delivers; a retryable
  answer or transport failure waits out the retry schedule; 410, a blocked destination or
  the exhausted budget fail the row (recorded: ``failure_reason``, ``last_status``).
- The notifier sleeps until the earliest claimable row, or until a commit (an event may
  have queued a row: a watcher task turns :meth:`Database.wait_for_commit` into a nudge,
  which is never lost), or ``max_sleep_s`` — never a fixed poll. It claims (a write) only
  when a read shows a row is due, so its own commits cannot keep it spinning. Commits
  nudge it at most every ``commit_wake_s``: a delivery burst commits ≈ 100 times a
  second, and a read per commit (a worker-thread hop each) cost as much as the
  completions' own writes (bench/HISTORY.md); a notification waits that much longer.
- A batch is delivered concurrently and finished before the next claim: one slow
  receiver delays the batch by at most an attempt's timeout.
- One boundary per attempt catches ``Exception`` (a bug, a tenant without a secret): it is
  logged and counts as a retryable attempt. A failed store write is not caught.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

import trio

from appliance.clock import WallClock
from appliance.core.notifications import (
    ATTEMPT_TIMEOUT_S,
    NOTIFICATION_POLICY,
    build_notification_request,
)
from appliance.core.retry import (
    TransportFailure,
    Verdict,
    classify_failure,
    classify_response,
    decide,
)
from appliance.core.runs import Transition
from appliance.engine.delivery import Exchange, SendResult, send
from appliance.engine.wakeup import Wakeup
from appliance.errors import StoreError
from appliance.store.infra.backend import Store
from appliance.store.notifications import (
    ClaimedNotification,
    NotificationOutcome,
    NotificationState,
    claim_notifications,
    complete_notification,
    next_notification_due,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifierConfig:
    batch: int = 16  # rows claimed (and delivered concurrently) at a time
    lease_ms: int = 60_000  # longer than an attempt's timeout
    max_sleep_s: float = 60.0  # never sleep longer: guards against wall-clock jumps
    commit_wake_s: float = 0.1  # commits nudge it at most this often
    user_agent: str = "Steeple"


class Notifier:
    def __init__(
        self,
        *,
        db: Store,
        clock: WallClock,
        client: Exchange,
        config: NotifierConfig,
        rand: random.Random | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._client = client
        self._config = config
        self._rand = rand or random.Random()
        self._wakeup = Wakeup()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_commits)
            task_status.started()
            while True:
                due = await self._db.read(next_notification_due)
                now = self._clock.now_ms()
                if due is not None and due <= now:
                    if not await self.run_once():
                        # Due but nothing claimable (the wall clock stepped back between
                        # the read and the claim): the claim's own commit nudged us, so
                        # wait a moment rather than spin.
                        await trio.sleep(1.0)
                    continue
                wait_s = self._config.max_sleep_s
                if due is not None and due > now:
                    wait_s = min(wait_s, (due - now) / 1000)
                await self._wakeup.wait(trio.current_time() + wait_s)

    async def run_once(self) -> int:
        """Claim the due rows (up to a batch) and deliver them; returns how many."""
        claimed = await self._db.write(
            claim_notifications,
            now=self._clock.now_ms(),
            lease_ms=self._config.lease_ms,
            limit=self._config.batch,
        )
        async with trio.open_nursery() as nursery:
            for notification in claimed:
                nursery.start_soon(self._deliver, notification)
        return len(claimed)

    async def _watch_commits(self) -> None:
        seen = self._db.commits
        while True:
            if self._db.commits == seen:  # none since the last nudge: wait for one
                await self._db.wait_for_commit()
            seen = self._db.commits
            self._wakeup.nudge()
            await trio.sleep(self._config.commit_wake_s)  # commits meanwhile: nudged next

    async def _deliver(self, notification: ClaimedNotification) -> None:
        result = await self._attempt(notification)
        now = self._clock.now_ms()
        outcome = self._outcome(notification, result, now)
        applied = await self._db.write(
            complete_notification,
            notification_id=notification.id,
            attempt=notification.attempt,
            outcome=outcome,
            now=now,
        )
        if not applied:
            log.warning(
                "notification %d: claimed again meanwhile; outcome dropped", notification.id
            )

    async def _attempt(self, notification: ClaimedNotification) -> SendResult:
        started = trio.current_time()
        try:
            request = build_notification_request(
                url=notification.url,
                body=notification.body,
                event_type=notification.event_type,
                idempotency_key=notification.idempotency_key,
                attempt=notification.attempt,
                secrets=notification.secrets,
                signed_at_s=self._clock.now_ms() // 1000,
                user_agent=self._config.user_agent,
            )
            with trio.move_on_after(ATTEMPT_TIMEOUT_S):
                return await send(self._client, request)
            return SendResult.failed(
                f"no answer within {ATTEMPT_TIMEOUT_S:g} s",
                started=started,
                failure=TransportFailure.DEADLINE,
            )
        except StoreError:
            raise
        except Exception as exc:  # the per-attempt boundary (module rules)
            log.exception("notification %d: attempt failed unexpectedly", notification.id)
            return SendResult.failed(repr(exc), started=started, failure=None)

    def _outcome(
        self, notification: ClaimedNotification, result: SendResult, now: int
    ) -> NotificationOutcome:
        verdict = _verdict(result, now)
        decision = decide(
            NOTIFICATION_POLICY,
            attempt=notification.attempt,
            verdict=verdict,
            scheduled_for_ms=notification.created_at,
            now_ms=now,
            rand=self._rand.random(),
        )
        state = {
            Transition.SUCCEED: NotificationState.DELIVERED,
            Transition.RETRY: NotificationState.PENDING,
        }.get(decision.transition, NotificationState.FAILED)
        return NotificationOutcome(
            state=state,
            due_at=decision.due_at,
            status=result.status,
            error=result.error,
            failure_reason=None
            if decision.failure_reason is None
            else str(decision.failure_reason),
        )


def _verdict(result: SendResult, now: int) -> Verdict:
    if result.status is not None:
        return classify_response(result.status, result.retry_after, now_ms=now)
    return classify_failure(result.failure or TransportFailure.PROTOCOL)
