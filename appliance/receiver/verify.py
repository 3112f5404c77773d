"""Verifying one Steeple delivery: signature, freshness, and the shape of every header used.

Rules:

- Nothing from the request is used before its shape is checked: every header read must be
  printable ASCII (what Steeple sends), the key 64 lowercase hex digits, the timestamp and
  attempt whole numbers, ``X-Schedule-Id`` ``sch_`` + 26 Crockford base32 characters,
  ``X-Scheduled-For`` ``YYYY-MM-DDTHH:MM:SSZ`` naming a real second. Junk of any kind —
  non-ASCII, missing, doubled, malformed — raises :class:`VerificationError` and nothing
  else, so a receiver answers it like any rejected request rather than with a 500.
- A delivery is accepted only if some ``v1`` signature over ``key.timestamp.body`` matches
  one of the tenant's secrets and the timestamp is within ``tolerance_s`` of ``now_s``
  (:func:`appliance.core.signing.verify`, the function the conformance vectors test).
- ``X-Schedule-Id`` and ``X-Scheduled-For`` are not signed themselves, but the signed key is
  derived from them (:func:`appliance.core.ids.idempotency_key`), so recomputing it
  authenticates them. ``X-Run-Id`` and ``X-Attempt`` are informational.
- The body is never parsed: any bytes verify, JSON or not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from appliance.core.ids import idempotency_key, looks_like
from appliance.core.signing import SignatureError, verify

TOLERANCE_S = 300

# (name read first, name used when it is absent)
_KEY = ("x-idempotency-key", "webhook-id")
_TIMESTAMP = ("x-signature-timestamp", "webhook-timestamp")
_SIGNATURE = ("x-signature", "webhook-signature")

_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")
_HEX_KEY = re.compile(r"[0-9a-f]{64}")
_SCHEDULED_FOR = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")  # 18 digits: far beyond any real value, fits int64


class VerificationError(Exception):
    """The request is not a valid, fresh, correctly signed Steeple delivery."""


class HeaderSource(Protocol):
    """Anything with ``items()`` giving ``(name, value)`` pairs: a dict,
    ``http.server``'s ``self.headers``, Werkzeug or Starlette headers."""

    def items(self) -> Iterable[tuple[str, str]]: ...


Headers = Mapping[str, str] | HeaderSource | Iterable[tuple[str, str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedDelivery:
    """A delivery whose signature, timestamp, key and header shapes checked out."""

    idempotency_key: str
    schedule_id: str
    run_id: str
    attempt: int  # 1-based; a repeat of the same key may carry any attempt number
    scheduled_for: str  # canonical text, e.g. 2026-08-06T03:00:00Z (never jittered)
    signed_at_s: int
    body: bytes

    def scheduled_for_datetime(self) -> datetime:
        """``scheduled_for`` as an aware UTC datetime."""
        return datetime.fromisoformat(self.scheduled_for)


def verify_delivery(
    headers: Headers,
    body: bytes,
    *,
    secrets: Sequence[str],
    now_s: int,
    tolerance_s: int = TOLERANCE_S,
) -> VerifiedDelivery:
    """Check one request; raises :class:`VerificationError` saying what is wrong.

    ``headers`` is matched case-insensitively; ``body`` must be the raw bytes as received
    (not re-serialised JSON); ``secrets`` are the tenant's active ``whsec_`` secrets."""
    fields = _lowercase(headers)
    key = _required(fields, *_KEY)
    if not _HEX_KEY.fullmatch(key):
        raise VerificationError(f"X-Idempotency-Key must be 64 lowercase hex digits: {key!r}")
    timestamp = _whole_number(_required(fields, *_TIMESTAMP), "X-Signature-Timestamp")
    signature = _required(fields, *_SIGNATURE)
    try:
        verify(secrets, key, timestamp, body, signature, now_s=now_s, tolerance_s=tolerance_s)
    except SignatureError as exc:
        raise VerificationError(f"signature rejected: {exc}") from exc
    return _delivery(fields, key=key, timestamp=timestamp, body=body)


def _delivery(
    fields: Mapping[str, str], *, key: str, timestamp: int, body: bytes
) -> VerifiedDelivery:
    schedule_id = _required(fields, "x-schedule-id")
    if not looks_like("sch", schedule_id):
        raise VerificationError(
            f"X-Schedule-Id must be sch_ + 26 base32 characters: {schedule_id!r}"
        )
    scheduled_for = _scheduled_for(_required(fields, "x-scheduled-for"))
    if idempotency_key(schedule_id, scheduled_for) != key:
        raise VerificationError(
            "X-Schedule-Id and X-Scheduled-For do not match the signed X-Idempotency-Key"
        )
    run_id = _required(fields, "x-run-id")
    if not looks_like("run", run_id):
        raise VerificationError(f"X-Run-Id must be run_ + 26 base32 characters: {run_id!r}")
    attempt = _whole_number(_required(fields, "x-attempt"), "X-Attempt")
    if attempt < 1:
        raise VerificationError(f"X-Attempt must be 1 or more, got {attempt}")
    return VerifiedDelivery(
        idempotency_key=key,
        schedule_id=schedule_id,
        run_id=run_id,
        attempt=attempt,
        scheduled_for=scheduled_for,
        signed_at_s=timestamp,
        body=body,
    )


def _lowercase(headers: Headers) -> dict[str, str]:
    """Header names lower-cased; a name given twice is refused as ambiguous."""
    pairs = headers.items() if hasattr(headers, "items") else headers
    fields: dict[str, str] = {}
    for name, value in pairs:
        lowered = name.lower()
        if lowered in fields:
            raise VerificationError(f"header {name!r} appears more than once")
        fields[lowered] = value
    return fields


def _required(fields: Mapping[str, str], name: str, fallback: str | None = None) -> str:
    """The value of ``name`` (else ``fallback``), trimmed of HTTP whitespace; printable
    ASCII only, so nothing later meets a character it cannot handle."""
    value = fields.get(name)
    if value is None and fallback is not None:
        value = fields.get(fallback)
    if value is None:
        alternative = f" (or {fallback})" if fallback else ""
        raise VerificationError(f"header {name}{alternative} is missing")
    trimmed = value.strip(" \t")
    if not _PRINTABLE_ASCII.fullmatch(trimmed):
        raise VerificationError(f"header {name} is not printable ASCII: {trimmed[:40]!r}")
    return trimmed


def _whole_number(text: str, name: str) -> int:
    if not _WHOLE_NUMBER.fullmatch(text):
        raise VerificationError(f"{name} must be a whole number, got {text[:40]!r}")
    return int(text)


def _scheduled_for(text: str) -> str:
    """``text`` if it is a canonical ``X-Scheduled-For`` naming a real UTC second."""
    problem = f"X-Scheduled-For must be YYYY-MM-DDTHH:MM:SSZ, got {text[:40]!r}"
    if not _SCHEDULED_FOR.fullmatch(text):
        raise VerificationError(problem)
    try:
        datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")  # noqa: DTZ007 - the Z is in the format
    except ValueError:
        raise VerificationError(problem + " (no such date or time)") from None
    return text
