"""One delivery attempt over the guarded transport, and the write-time destination check.

``send`` turns httpx's exceptions (and ``DestinationBlocked``) into a
:class:`~appliance.core.retry.TransportFailure`: it never raises for a transport problem,
and cancellation (the attempt's hard deadline, owned by the caller) is never caught.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import trio

from appliance.core.addresses import (
    AddressPolicy,
    IPAddress,
    check_target_url,
    parse_ip_literal,
)
from appliance.core.delivery import DeliveryRequest
from appliance.core.retry import TransportFailure
from appliance.engine.transport import (
    EXCERPT_BYTES,
    RESOLVE_TIMEOUT_S,
    DeliveryClient,
    NameNotResolved,
    NameResolutionError,
    Resolver,
    TLSHandshakeError,
    blocked_message,
    resolve_host,
)
from appliance.errors import DestinationBlocked, ValidationError

TARGET_FIELD = "target_url"


@dataclass(frozen=True, slots=True, kw_only=True)
class SendResult:
    """What one attempt saw: a status (any, 3xx included) or a transport failure."""

    status: int | None
    retry_after: str | None
    location: str | None
    excerpt: str
    failure: TransportFailure | None
    error: str | None
    latency_ms: int

    @classmethod
    def failed(cls, error: str, *, started: float, failure: TransportFailure | None) -> SendResult:
        """No response: a transport failure, or an attempt Steeple cut short or broke.
        ``started`` is the attempt's trio start time."""
        return cls(
            status=None,
            retry_after=None,
            location=None,
            excerpt="",
            failure=failure,
            error=error,
            latency_ms=_elapsed_ms(started),
        )


async def send(client: DeliveryClient, request: DeliveryRequest) -> SendResult:
    """POST ``request`` once. Never raises for transport problems; cancellation propagates."""
    started = trio.current_time()
    try:
        answer = await client.exchange(request)
    except DestinationBlocked as exc:
        return SendResult.failed(exc.reason, started=started, failure=TransportFailure.BLOCKED)
    except httpx.InvalidURL as exc:
        return SendResult.failed(
            f"invalid URL: {exc}", started=started, failure=TransportFailure.BLOCKED
        )
    except httpx.TransportError as exc:
        return SendResult.failed(_describe(exc), started=started, failure=_failure_of(exc))
    return SendResult(
        status=answer.status,
        retry_after=answer.header(b"retry-after"),
        location=answer.header(b"location"),
        excerpt=answer.excerpt[:EXCERPT_BYTES].decode("utf-8", errors="replace"),
        failure=None,
        error=answer.error,
        latency_ms=_elapsed_ms(started),
    )


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _failure_of(exc: httpx.TransportError) -> TransportFailure:
    if isinstance(exc, NameResolutionError):
        return TransportFailure.DNS
    if isinstance(exc, TLSHandshakeError):
        return TransportFailure.TLS
    if isinstance(exc, httpx.TimeoutException):
        return TransportFailure.TIMEOUT
    if isinstance(exc, httpx.ProtocolError | httpx.UnsupportedProtocol):
        return TransportFailure.PROTOCOL
    return TransportFailure.CONNECT  # connect refused/reset, read/write errors


def _elapsed_ms(started: float) -> int:
    return round((trio.current_time() - started) * 1000)


async def check_destination(
    policy: AddressPolicy,
    url: str,
    *,
    resolve: Resolver = resolve_host,
    resolve_timeout_s: float = RESOLVE_TIMEOUT_S,
) -> None:
    """Write-time check: static URL rules, then every address the host resolves to.

    Raises ValidationError (field "target_url"). A name that does not resolve is refused
    (fail closed); the same check runs again at every connection.
    """
    check_target_url(url, policy)
    host = urlsplit(url).hostname or ""
    if parse_ip_literal(host) is not None:
        return  # judged by check_target_url already
    addresses = await _resolve_or_refuse(host, resolve, resolve_timeout_s)
    message = blocked_message(policy, host, addresses)
    if message is not None:
        raise ValidationError.single(TARGET_FIELD, message)


async def _resolve_or_refuse(host: str, resolve: Resolver, timeout_s: float) -> list[IPAddress]:
    refuse = "Steeple refuses destinations it cannot resolve"
    with trio.move_on_after(timeout_s):
        try:
            addresses = await resolve(host)
        except NameNotResolved as exc:
            raise ValidationError.single(TARGET_FIELD, f"{exc}; {refuse}") from None
        if not addresses:
            raise ValidationError.single(TARGET_FIELD, f"host {host!r} has no addresses; {refuse}")
        return addresses
    raise ValidationError.single(
        TARGET_FIELD, f"looking up host {host!r} took longer than {timeout_s:g} s; {refuse}"
    )
