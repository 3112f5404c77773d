"""Tenant-side helper: verify a Steeple delivery, then act on its key once.

The contract (ADR 0034): *you may receive a request more than once. Verify the signature,
then deduplicate on X-Idempotency-Key.* This package does both with the standard library
and the pure :mod:`appliance.core.signing` and :mod:`appliance.core.ids` only (an
import-linter contract keeps it so), so it can be copied next to a tenant's service.

- :mod:`~appliance.receiver.verify` — signature, freshness and header shapes.
- :mod:`~appliance.receiver.claims` — the two-phase key record and its one rule.
- :mod:`~appliance.receiver.sqlite` — :class:`SqliteDeduper`: transactional ``once`` and
  durable two-phase records, shared by processes.
- :mod:`~appliance.receiver.memory` — :class:`MemoryDeduper`: the weaker, in-process one.
- :mod:`~appliance.receiver.receive` — :class:`Receiver`: verify, claim, handle, record.

No global state: secrets, clock (``now_s``) and the deduper are passed in. docs/receiver.md
states the guarantee of each way of using it.
"""

from appliance.receiver.claims import Claim, Deduper, DeliveryInProgress, Seen
from appliance.receiver.memory import MemoryDeduper
from appliance.receiver.receive import HOLD_S, Receipt, Receiver
from appliance.receiver.sqlite import SqliteDeduper
from appliance.receiver.verify import (
    TOLERANCE_S,
    Headers,
    HeaderSource,
    VerificationError,
    VerifiedDelivery,
    verify_delivery,
)

__all__ = [
    "HOLD_S",
    "TOLERANCE_S",
    "Claim",
    "Deduper",
    "DeliveryInProgress",
    "HeaderSource",
    "Headers",
    "MemoryDeduper",
    "Receipt",
    "Receiver",
    "Seen",
    "SqliteDeduper",
    "VerificationError",
    "VerifiedDelivery",
    "verify_delivery",
]
