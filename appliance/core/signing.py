"""Standard Webhooks v1 signing (ADR 0032), with Steeple's header names.

Signed content is ``msg_id + "." + timestamp + "." + body`` where ``msg_id`` is the run's
idempotency key and ``timestamp`` the unix seconds at signing. ``X-Signature`` is a
space-separated list of ``v1,<base64 HMAC-SHA256>``, one per active secret, newest first.
A secret is ``whsec_`` + base64 of its key bytes. Stdlib only: the tenant-side receiver
helper reuses :func:`verify`. Each secret's keyed HMAC state is made once and copied per
message (:func:`_keyed`): the same HMAC-SHA256, without setting the key up every time.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
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


@functools.lru_cache(maxsize=1024)  # a tenant's few secrets sign every delivery
def _keyed(secret: str) -> hmac.HMAC:
    """The HMAC-SHA256 state keyed by ``secret``, fed nothing: never updated, only copied."""
    return hmac.new(secret_key(secret), digestmod=hashlib.sha256)


def _mac(secret: str, content: bytes) -> str:
    mac = _keyed(secret).copy()
    mac.update(content)
    return binascii.b2a_base64(mac.digest(), newline=False).decode("ascii")


def _content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    return f"{msg_id}.{timestamp}.".encode() + body


def sign(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``X-Signature`` value: one ``v1,`` entry per secret, in the order given."""
    if not secrets:
        raise SignatureError("at least one signing secret is needed")
    content = _content(msg_id, timestamp, body)
    return " ".join([f"{VERSION},{_mac(secret, content)}" for secret in secrets])


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
    content = _content(msg_id, timestamp, body)
    for secret in secrets:
        expected = _mac(secret, content)
        if any(hmac.compare_digest(expected, value) for value in offered):
            return
    raise SignatureError("no v1 signature matches")
