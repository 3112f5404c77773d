"""Signed deliveries for the receiver helper's tests, built by Steeple's own request builder
(appliance.core.delivery), so the helper is tested against what the engine sends."""

from __future__ import annotations

from appliance.core.delivery import DeliveryRequest, build_request
from appliance.core.ids import idempotency_key, run_id
from appliance.core.instants import parse_instant

SCHEDULE_ID = "sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB"
SCHEDULED_FOR = "2026-08-06T03:00:00Z"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SIGNED_AT_S = 1785985210
KEY = idempotency_key(SCHEDULE_ID, SCHEDULED_FOR)


def signed(
    *,
    body: bytes = b'{"task":"billing-rollup"}',
    secrets: tuple[str, ...] = (SECRET,),
    attempt: int = 1,
    signed_at_s: int = SIGNED_AT_S,
    scheduled_for: str = SCHEDULED_FOR,
    content_type: str = "application/json",
) -> DeliveryRequest:
    """One delivery of ``SCHEDULE_ID`` at ``scheduled_for``, as the engine would send it."""
    return build_request(
        target_url="https://hooks.example.com/",
        body=body,
        content_type=content_type,
        tenant_headers=(),
        schedule_id=SCHEDULE_ID,
        run_id=run_id(SCHEDULE_ID, scheduled_for),
        attempt=attempt,
        scheduled_for_ms=parse_instant(scheduled_for),
        idempotency_key=idempotency_key(SCHEDULE_ID, scheduled_for),
        secrets=secrets,
        signed_at_s=signed_at_s,
        user_agent="Steeple/test",
    )
