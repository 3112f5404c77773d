"""Tenant-side helper: verify a Steeple delivery, then deduplicate it on its key.

The contract (ADR 0034): *you may receive a request more than once. Verify the signature,
then deduplicate on X-Idempotency-Key.* This module does both, with the standard library and
:mod:`appliance.core.signing` only, so it can be copied next to a tenant's service.

Rules:

- A delivery is accepted only if some ``v1`` signature over ``key.timestamp.body`` matches
  one of the tenant's secrets and the timestamp is within ``tolerance_s`` (300 s) of
  ``now_s``. The ``X-`` header names are read first; ``webhook-id`` /
  ``webhook-timestamp`` / ``webhook-signature`` stand in when they are absent.
- ``X-Schedule-Id`` and ``X-Scheduled-For`` are not signed themselves, but the signed key is
  their SHA-256, so a verified delivery checks that they match it. ``X-Run-Id`` and
  ``X-Attempt`` are informational.
- Deduplication records a key only for a delivery that verified, and forgets it again when
  handling raises, so Steeple's retry is handled rather than acknowledged as a duplicate.
- No global state: secrets, clock (``now_s``) and the deduper are passed in.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from appliance.core.signing import SignatureError, secret_key, verify

TOLERANCE_S = 300

# (name read first, name used when it is absent)
_KEY = ("x-idempotency-key", "webhook-id")
_TIMESTAMP = ("x-signature-timestamp", "webhook-timestamp")
_SIGNATURE = ("x-signature", "webhook-signature")


class VerificationError(Exception):
    """The request is not a valid, fresh, correctly signed Steeple delivery."""


class HeaderSource(Protocol):
    """Anything with ``items()`` giving ``(name, value)`` pairs: a dict,
    ``http.server``'s ``self.headers``, Werkzeug or Starlette headers."""

    def items(self) -> Iterable[tuple[str, str]]: ...


Headers = Mapping[str, str] | HeaderSource | Iterable[tuple[str, str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedDelivery:
    """A delivery whose signature, timestamp and key checked out."""

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
    timestamp = _parse_int(_required(fields, *_TIMESTAMP), "X-Signature-Timestamp")
    try:
        signature = _required(fields, *_SIGNATURE)
        verify(secrets, key, timestamp, body, signature, now_s=now_s, tolerance_s=tolerance_s)
    except SignatureError as exc:
        raise VerificationError(f"signature rejected: {exc}") from exc
    return _delivery(fields, key=key, timestamp=timestamp, body=body)


def _delivery(
    fields: Mapping[str, str], *, key: str, timestamp: int, body: bytes
) -> VerifiedDelivery:
    schedule_id = _required(fields, "x-schedule-id")
    scheduled_for = _required(fields, "x-scheduled-for")
    expected = hashlib.sha256((schedule_id + scheduled_for).encode("utf-8")).hexdigest()
    if expected != key:
        raise VerificationError(
            "X-Schedule-Id and X-Scheduled-For do not match the signed X-Idempotency-Key"
        )
    attempt = _parse_int(_required(fields, "x-attempt"), "X-Attempt")
    if attempt < 1:
        raise VerificationError(f"X-Attempt must be 1 or more, got {attempt}")
    return VerifiedDelivery(
        idempotency_key=key,
        schedule_id=schedule_id,
        run_id=_required(fields, "x-run-id"),
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
            raise VerificationError(f"header {name} appears more than once")
        fields[lowered] = value
    return fields


def _required(fields: Mapping[str, str], name: str, fallback: str | None = None) -> str:
    value = fields.get(name)
    if value is None and fallback is not None:
        value = fields.get(fallback)
    if value is None:
        alternative = f" (or {fallback})" if fallback else ""
        raise VerificationError(f"header {name}{alternative} is missing")
    return value.strip()


def _parse_int(text: str, name: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        raise VerificationError(f"{name} must be a whole number, got {text[:40]!r}")
    return int(text)


class Deduper(Protocol):
    """Remembers idempotency keys already handled."""

    def first_seen(self, key: str, *, now_s: int) -> bool:
        """Record ``key``; True if it was not recorded before."""
        ...

    def forget(self, key: str) -> None:
        """Drop ``key`` so the next delivery carrying it is handled again."""
        ...


class MemoryDeduper:
    """Keys in process memory, the oldest evicted beyond ``max_keys``. Lost on restart and
    not shared between processes: for tests and single-process receivers."""

    def __init__(self, *, max_keys: int = 100_000) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        self._max_keys = max_keys
        self._keys: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # http.server's ThreadingHTTPServer calls from threads

    def first_seen(self, key: str, *, now_s: int) -> bool:
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = now_s
            while len(self._keys) > self._max_keys:
                self._keys.popitem(last=False)
            return True

    def forget(self, key: str) -> None:
        with self._lock:
            self._keys.pop(key, None)

    def __len__(self) -> int:
        return len(self._keys)


class SqliteDeduper:
    """Keys in an SQLite file (stdlib ``sqlite3``): survives restarts, shared by processes on
    one machine. Each call is its own transaction. Call :meth:`prune` now and then."""

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS steeple_deliveries ("
        " idempotency_key TEXT PRIMARY KEY, first_seen_at INTEGER NOT NULL)"
    )

    def __init__(self, path: str | Path, *, timeout_s: float = 5.0) -> None:
        # Autocommit (isolation_level=None): every statement commits on its own, so a key is
        # durable before first_seen returns. One connection, guarded by a lock, serves threads.
        self._conn = sqlite3.connect(
            path, timeout=timeout_s, isolation_level=None, check_same_thread=False
        )
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute(self._SCHEMA)

    def first_seen(self, key: str, *, now_s: int) -> bool:
        with self._lock:
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO steeple_deliveries (idempotency_key, first_seen_at)"
                " VALUES (?, ?)",
                (key, now_s),
            )
            return cursor.rowcount == 1

    def forget(self, key: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM steeple_deliveries WHERE idempotency_key = ?", (key,))

    def prune(self, *, older_than_s: int) -> int:
        """Delete keys first seen before ``older_than_s`` (unix seconds); returns how many.
        Keep keys longer than Steeple can retry a run: 8 days covers the maximum window."""
        with self._lock:
            cursor = self._conn.execute(
                "DELETE FROM steeple_deliveries WHERE first_seen_at < ?", (older_than_s,)
            )
            return cursor.rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteDeduper:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """The result of :meth:`Receiver.receive`. ``first_seen`` is False for a duplicate,
    which was not handled again; answer it with a 2xx all the same."""

    delivery: VerifiedDelivery
    first_seen: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Receiver:
    """Verification and deduplication for one tenant's endpoint."""

    secrets: tuple[str, ...]
    deduper: Deduper
    tolerance_s: int = TOLERANCE_S

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ValueError("at least one signing secret (whsec_…) is needed")
        for secret in self.secrets:
            secret_key(secret)  # a malformed secret fails here, not on the first request

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
        """Verify, then call ``handle`` once per key. If ``handle`` raises, the key is
        forgotten and the exception propagates: answer non-2xx and Steeple retries.

        If the process dies inside ``handle``, the key stays recorded and the retry is
        taken for a duplicate; where that matters, make the effect itself idempotent."""
        delivery = self.verify(headers, body, now_s=now_s)
        if not self.deduper.first_seen(delivery.idempotency_key, now_s=now_s):
            return Receipt(delivery=delivery, first_seen=False)
        try:
            handle(delivery)
        except BaseException:
            self.deduper.forget(delivery.idempotency_key)
            raise
        return Receipt(delivery=delivery, first_seen=True)
