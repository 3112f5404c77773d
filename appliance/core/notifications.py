"""Failure notifications: what a tenant's notification URL receives (docs/receiver.md,
"Failure notifications").

Rules this module guards:

- Only :data:`NOTIFIED_TYPES` are delivered: a run that failed, a schedule its receiver
  paused (410 Gone), an occurrence missed.
- The body is the event envelope (:func:`appliance.core.envelope.render_event`), the same
  JSON as an item of ``GET /v1/events``.
- The delivery contract of ADR 0032 applies where it can: Standard Webhooks v1 signatures
  with the tenant's active secrets, newest first, made immediately before each attempt;
  ``X-Idempotency-Key`` (= ``webhook-id``) is :func:`idempotency_key` of the event, so it
  is identical on every attempt and every re-delivery after a crash. There is no schedule
  occurrence behind a notification, so ``X-Schedule-Id``/``X-Run-Id``/``X-Scheduled-For``
  are not sent (the envelope names the schedule and run); ``X-Event-Type`` says what the
  body is.
- Retries follow :mod:`appliance.core.retry` with :data:`NOTIFICATION_POLICY`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from appliance.core.addresses import AddressPolicy, check_target_url
from appliance.core.delivery import DeliveryRequest
from appliance.core.envelope import render_event
from appliance.core.events import Event, EventType
from appliance.core.retry import RetryPolicy
from appliance.core.signing import signature_headers
from appliance.errors import FieldError, ValidationError

NOTIFIED_TYPES: frozenset[EventType] = frozenset(
    {EventType.RUN_FAILED, EventType.SCHEDULE_PAUSED_BY_RECEIVER, EventType.RUN_MISSED}
)
NOTIFICATION_POLICY = RetryPolicy()  # 8 attempts over at most 7 days, as a schedule's default
ATTEMPT_TIMEOUT_S = 10.0
CONTENT_TYPE = "application/json"
MAX_URL_CHARS = 2048  # as a schedule's target_url
_EXAMPLE = '{"url": "https://example.com/steeple-failures"}'


def parse_notification_target(obj: object, *, policy: AddressPolicy) -> str:
    """The URL of a ``PUT /v1/notifications`` body, checked as a schedule's ``target_url``
    is (:func:`appliance.core.addresses.check_target_url`; the caller then resolves it).
    Raises :class:`ValidationError` with field ``body`` or ``url``."""
    if not isinstance(obj, dict):
        raise ValidationError.single("body", f"must be a JSON object, e.g. {_EXAMPLE}")
    unknown = sorted(set(obj) - {"url"})
    if unknown:
        raise ValidationError.single(str(unknown[0]), "is not a field of a notification target")
    url = obj.get("url")
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise ValidationError.single(
            "url", f"must be an http:// or https:// URL of at most {MAX_URL_CHARS} characters"
        )
    try:
        return check_target_url(url, policy)
    except ValidationError as error:
        raise as_url_error(error) from None


def as_url_error(error: ValidationError) -> ValidationError:
    """``error`` (about a ``target_url``) restated for the ``url`` field."""
    return ValidationError([FieldError(field="url", message=e.message) for e in error.errors])


def idempotency_key(event_id: str) -> str:
    """The key every delivery of event ``event_id`` carries: sha256 hex of
    ``"notification:" + event_id``."""
    return hashlib.sha256(f"notification:{event_id}".encode()).hexdigest()


def notification_body(event: Event) -> bytes:
    """The exact bytes every attempt sends: the envelope as compact JSON."""
    return json.dumps(render_event(event), separators=(",", ":"), sort_keys=True).encode()


def build_notification_request(
    *,
    url: str,
    body: bytes,
    event_type: str,
    idempotency_key: str,
    attempt: int,
    secrets: Sequence[str],
    signed_at_s: int,
    user_agent: str,
) -> DeliveryRequest:
    """Attempt ``attempt`` (1-based) of a notification, signed at ``signed_at_s`` (unix
    seconds) with every active secret. Raises ``ValueError`` for an attempt below 1 and
    :class:`appliance.core.signing.SignatureError` without secrets."""
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    headers = (
        ("X-Idempotency-Key", idempotency_key),
        ("X-Event-Type", event_type),
        ("X-Attempt", str(attempt)),
        *signature_headers(secrets, idempotency_key, signed_at_s, body),
        ("User-Agent", user_agent),
        ("Content-Type", CONTENT_TYPE),
        ("Accept-Encoding", "identity"),
    )
    return DeliveryRequest(url=url, headers=headers, body=body)
