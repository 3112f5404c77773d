"""The delivery interface: one request out, the receiver's answer back, or one error.

    Exchange.exchange(request) -> Answer     the receiver answered (any status, 3xx too)
                               raises DeliveryFailed(failure, message)    it did not

Rules:
- :class:`DeliveryFailed` is the only error an exchange raises on purpose. It is raised
  where the failure happens (resolving, checking, connecting, the TLS handshake, writing,
  reading the head) and carries its :class:`~appliance.core.retry.TransportFailure`, so
  nothing translates errors on the way up.
- A failure while reading the *body* is not a DeliveryFailed: the status already says what
  the receiver decided, so the :class:`Answer` carries the status and the error text.
- The excerpt is the first :data:`EXCERPT_BYTES` of the body, cut once, where the body is
  read; an Answer refuses a longer one.
- No timeouts here: the caller bounds an attempt with a cancel scope (the dispatcher: the
  schedule's ``timeout_seconds``, within its lease). Cancellation is never caught.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from appliance.core.delivery import DeliveryRequest
from appliance.core.retry import TransportFailure
from appliance.errors import SteepleError

EXCERPT_BYTES = 16 * 1024


class DeliveryFailed(SteepleError):
    """An attempt got no HTTP answer; ``failure`` says why, the message in words."""

    def __init__(self, failure: TransportFailure, message: str) -> None:
        super().__init__(message)
        self.failure = failure
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What the receiver said: its status and headers (names lower-case), the first
    ``EXCERPT_BYTES`` of its body, and ``error`` if reading the body failed."""

    status: int
    headers: Sequence[tuple[bytes, bytes]] = ()
    excerpt: bytes = b""
    error: str | None = None

    def __post_init__(self) -> None:
        if len(self.excerpt) > EXCERPT_BYTES:
            raise ValueError(f"an excerpt is at most {EXCERPT_BYTES} bytes")

    def header(self, name: bytes) -> str | None:
        """The first value of header ``name`` (lower-case): UTF-8, else ISO-8859-1."""
        for key, value in self.headers:
            if key == name:
                try:
                    return value.decode("utf-8")
                except UnicodeDecodeError:
                    return value.decode("iso-8859-1")
        return None


class Exchange(Protocol):
    """Sends one delivery request and returns the receiver's :class:`Answer`; raises
    :class:`DeliveryFailed` when there is none (see the module rules)."""

    async def exchange(self, request: DeliveryRequest) -> Answer: ...
