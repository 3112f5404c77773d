"""One tenant endpoint: verify each delivery, then run its handler in two phases.

:meth:`Receiver.receive` claims the key *before* the handler runs, but only as in progress
with an expiry (:mod:`appliance.receiver.claims`), and records it done only *after* the
handler returned. So a process that dies inside the handler leaves a hold that expires, and
Steeple's redelivery after that runs the handler again; a delivery of a key whose handling
is still running raises :class:`DeliveryInProgress` and must be answered non-2xx.

For effects that are rows in an SQLite database, verify with :meth:`Receiver.verify` and
use :meth:`appliance.receiver.SqliteDeduper.once` instead: exactly once, no hold to size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from appliance.core.signing import secret_key
from appliance.receiver.claims import Deduper, DeliveryInProgress, Seen, check_hold
from appliance.receiver.verify import (
    TOLERANCE_S,
    Headers,
    VerifiedDelivery,
    verify_delivery,
)

HOLD_S = 300  # the longest schedule timeout: a handler that answers in time is not outlived


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """The result of :meth:`Receiver.receive`. ``first_seen`` is False for a duplicate of a
    done key, which was not handled again; answer it with a 2xx all the same."""

    delivery: VerifiedDelivery
    first_seen: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Receiver:
    """Verification and two-phase deduplication for one tenant's endpoint.

    ``hold_s`` is how long a handling holds its key: longer than the handler can ever run
    (a redelivery after it runs the handler again), and no longer than needed (after a
    crash, the delivery waits that long for its next attempt)."""

    secrets: tuple[str, ...]
    deduper: Deduper
    tolerance_s: int = TOLERANCE_S
    hold_s: int = HOLD_S

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ValueError("at least one signing secret (whsec_…) is needed")
        for secret in self.secrets:
            secret_key(secret)  # a malformed secret fails here, not on the first request
        check_hold(self.hold_s)

    def verify(self, headers: Headers, body: bytes, *, now_s: int) -> VerifiedDelivery:
        """:func:`verify_delivery` with this receiver's secrets."""
        return verify_delivery(
            headers, body, secrets=self.secrets, now_s=now_s, tolerance_s=self.tolerance_s
        )

    def receive(
        self,
        headers: Headers,
        body: bytes,
        *,
        now_s: int,
        handle: Callable[[VerifiedDelivery], None],
    ) -> Receipt:
        """Verify, then call ``handle`` unless the key is done; record it done when
        ``handle`` returns.

        Raises :class:`VerificationError` (answer 4xx), :class:`DeliveryInProgress` (answer
        409 with ``Retry-After``), or what ``handle`` raised — the key is then released, so
        answer non-2xx and Steeple's retry runs ``handle`` again."""
        delivery = self.verify(headers, body, now_s=now_s)
        claim = self.deduper.claim(delivery.idempotency_key, now_s=now_s, hold_s=self.hold_s)
        if claim.seen is Seen.DONE:
            return Receipt(delivery=delivery, first_seen=False)
        if claim.seen is Seen.IN_PROGRESS:
            retry_after_s = max(1, claim.expires_at_s - now_s)
            raise DeliveryInProgress(claim.key, retry_after_s=retry_after_s)
        try:
            handle(delivery)
        except BaseException:
            self.deduper.release(claim)
            raise
        self.deduper.finish(claim, now_s=now_s)
        return Receipt(delivery=delivery, first_seen=True)
