"""Opening delivery connections under the address policy (ADR 0032, "Outbound safety").

Rules:
- :class:`Connector` resolves the host itself, judges *every* resolved address with
  ``core.addresses.block_reason`` (one bad address blocks the host) and then connects to a
  checked address — never to a name the OS would resolve again. This is what catches DNS
  rebinding: the check is on the address actually connected to.
- TLS runs over that connection with ``server_hostname`` = the URL's host, so certificates
  are still verified against the name the tenant configured. The SSL context is built once
  (certifi's CAs, nothing from the environment) and shared by every connection.
- Every failure is a :class:`DeliveryFailed` raised here with its class: ``dns`` (no
  address: fail closed), ``destination_blocked``, ``connect``, ``tls``. Its message is the
  tenant's to read (an attempt's error): it names no address the network gave. A name
  refused for what it resolves to gets :func:`refusal`, the write-time check's words, and
  the operator's log gets the host, the address and why; a failed connection names the
  host and port, not the address tried. There is no
  timeout of its own: the attempt's deadline covers resolving, connecting and the
  handshake.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import ssl
from collections.abc import Awaitable, Callable

import certifi
import trio

from appliance.core.addresses import (
    ALLOW_FLAG,
    AddressPolicy,
    IPAddress,
    block_reason,
    describe_block,
    parse_ip_literal,
)
from appliance.core.retry import TransportFailure
from appliance.engine.delivery.exchange import DeliveryFailed

log = logging.getLogger(__name__)

Resolver = Callable[[str], Awaitable[list[IPAddress]]]
"""Host name -> its addresses; raises DeliveryFailed(DNS). A seam for tests."""

OpenTCP = Callable[[IPAddress, int], Awaitable[trio.SocketStream]]
"""Connect to exactly this address and port; raises OSError. A seam for tests."""


def name_not_resolved(message: str) -> DeliveryFailed:
    return DeliveryFailed(TransportFailure.DNS, message)


async def resolve_host(host: str) -> list[IPAddress]:
    """The host's addresses as the system resolver gives them, without duplicates."""
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise name_not_resolved(f"could not resolve host {host!r} ({exc})") from exc
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise name_not_resolved(f"host {host!r} has no addresses")
    return addresses


def blocked_message(policy: AddressPolicy, host: str, addresses: list[IPAddress]) -> str | None:
    """Why one of ``host``'s addresses is refused, or None when all are allowed."""
    for address in addresses:
        reason = block_reason(policy, address)
        if reason is not None:
            named = None if parse_ip_literal(host) == address else host
            return describe_block(address, reason, host=named)
    return None


def refusal(host: str) -> str:
    """What the tenant is told when the network refuses ``host``: the same words whether
    it resolves to a blocked address, does not resolve, or resolves too slowly, at write
    time and at connect time, so they neither name an internal address nor tell which
    internal names exist."""
    return (
        f"host {host!r} does not resolve to a public address that Steeple may deliver to; "
        f"check the name, or ask the operator to allow it with {ALLOW_FLAG} "
        "(the appliance's log says why it was refused)"
    )


async def open_tcp(address: IPAddress, port: int) -> trio.SocketStream:
    """A TCP connection to exactly ``address`` (no resolution, no other address tried)."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = trio.socket.socket(family, socket.SOCK_STREAM)
    try:
        await sock.connect((str(address), port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)  # sets TCP_NODELAY


def _not_connected(host: str, port: int, error: OSError | None) -> str:
    """A failed connection in words without the address tried (trio's own message
    names it)."""
    reason = os.strerror(error.errno) if error is not None and error.errno else str(error)
    return f"could not connect to {host} port {port}: {reason}"


def default_ssl_context() -> ssl.SSLContext:
    """Verifying context with certifi's CAs, HTTP/1.1 only. Loading the CA bundle is costly
    (bench/HISTORY.md, "Costs once quoted in code comments"): build once."""
    context = ssl.create_default_context(cafile=certifi.where())
    context.set_alpn_protocols(["http/1.1"])
    return context


class Connector:
    """Opens connections only to addresses the policy allows."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        ssl_context: ssl.SSLContext | None = None,
        resolve: Resolver = resolve_host,
        connect: OpenTCP = open_tcp,
    ) -> None:
        self._policy = policy
        self._ssl_context = ssl_context if ssl_context is not None else default_ssl_context()
        self._resolve = resolve
        self._connect = connect

    async def open(
        self, scheme: str, host: str, port: int
    ) -> tuple[trio.abc.Stream, trio.SocketStream]:
        """The stream to speak HTTP over (TLS for https) and the TCP stream beneath it."""
        tcp = await self.connect_tcp(host, port)
        if scheme != "https":
            return tcp, tcp
        try:
            return await self._start_tls(tcp, host), tcp
        except BaseException:
            tcp.socket.close()
            raise

    async def connect_tcp(self, host: str, port: int) -> trio.SocketStream:
        """Resolve, check every address, connect to the first checked one that answers."""
        addresses = await self._addresses(host)
        detail = blocked_message(self._policy, host, addresses)
        if detail is not None:
            log.warning("delivery to host %r refused by the address policy: %s", host, detail)
            typed = parse_ip_literal(host) is not None  # the tenant's own words: say them
            raise DeliveryFailed(TransportFailure.BLOCKED, detail if typed else refusal(host))
        error: OSError | None = None
        for address in addresses:
            try:
                return await self._connect(address, port)
            except OSError as exc:
                error = exc
        raise DeliveryFailed(TransportFailure.CONNECT, _not_connected(host, port, error))

    async def _addresses(self, host: str) -> list[IPAddress]:
        literal = parse_ip_literal(host)
        if literal is not None:
            return [literal]
        addresses = await self._resolve(host)
        if not addresses:
            raise name_not_resolved(f"host {host!r} has no addresses")
        return addresses

    async def _start_tls(
        self, tcp: trio.SocketStream, host: str
    ) -> trio.SSLStream[trio.SocketStream]:
        # https_compatible: HTTP frames its own messages, so an EOF without close_notify is
        # not an attack we must detect (the response reader notices a truncated body itself).
        stream = trio.SSLStream(tcp, self._ssl_context, server_hostname=host, https_compatible=True)
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__ or exc
            raise DeliveryFailed(
                TransportFailure.TLS, f"TLS handshake with {host} failed: {cause}"
            ) from exc
        return stream
