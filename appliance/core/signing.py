"""Standard Webhooks v1 signing (ADR 0032), with Steeple's header names.

Signed content is ``msg_id + "." + timestamp + "." + body`` where ``msg_id`` is the run's
idempotency key and ``timestamp`` the unix seconds at signing. ``X-Signature`` is a
space-separated list of ``v1,<base64 HMAC-SHA256>``, one per active secret, newest first.
A secret is ``whsec_`` + base64 of its key bytes. Stdlib only: the tenant-side receiver
helper reuses :func:`verify`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
import os
from collections.abc import Callable, Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
VERSION = "v1"


class SignatureError(Exception):
    """The signature header, timestamp or secret is malformed or does not verify."""


def new_signing_secret(randbytes: Callable[[int], bytes] = os.urandom) -> str:
    return SECRET_PREFIX + base64.b64encode(randbytes(SECRET_BYTES)).decode("ascii")


@functools.lru_cache(maxsize=1024)  # pure; a tenant's few secrets sign every delivery
def secret_key(secret: str) -> bytes:
    """The HMAC key bytes of a ``whsec_`` secret."""
    if not secret.startswith(SECRET_PREFIX):
        raise SignatureError("a signing secret starts with 'whsec_'")
    try:
        return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise SignatureError("a signing secret is whsec_ followed by base64") from None


def _mac(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    content = f"{msg_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.digest(key, content, "sha256")).decode("ascii")


def sign(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``X-Signature`` value: one ``v1,`` entry per secret, in the order given."""
    if not secrets:
        raise SignatureError("at least one signing secret is needed")
    return " ".join(f"{VERSION},{_mac(secret_key(s), msg_id, timestamp, body)}" for s in secrets)


def signature_headers(
    secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> tuple[tuple[str, str], ...]:
    """The signing headers of one attempt, in wire order: ours (``X-Signature…``) and the
    Standard Webhooks names (``webhook-…``) carrying the same values."""
    signature = sign(secrets, msg_id, timestamp, body)
    stamp = str(timestamp)
    return (
        ("X-Signature-Timestamp", stamp),
        ("X-Signature", signature),
        ("webhook-id", msg_id),
        ("webhook-timestamp", stamp),
        ("webhook-signature", signature),
    )


def verify(
    secrets: Sequence[str],
    msg_id: str,
    timestamp: int,
    body: bytes,
    signature_header: str,
    *,
    now_s: int,
    tolerance_s: int = 300,
) -> None:
    """Raise :class:`SignatureError` unless some ``v1`` entry matches some secret and the
    timestamp is within ``tolerance_s`` of ``now_s``. Unknown versions are ignored."""
    if abs(now_s - timestamp) > tolerance_s:
        raise SignatureError(f"timestamp {timestamp} is more than {tolerance_s} s from now")
    offered = [
        value
        for version, _, value in (entry.partition(",") for entry in signature_header.split())
        if version == VERSION
    ]
    for secret in secrets:
        expected = _mac(secret_key(secret), msg_id, timestamp, body)
        if any(hmac.compare_digest(expected, value) for value in offered):
            return
    raise SignatureError("no v1 signature matches")
