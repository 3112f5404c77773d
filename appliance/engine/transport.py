"""The guarded delivery transport (ADR 0032, "Outbound safety").

Rules:
- Every connection goes through :class:`GuardedBackend`: it resolves the host itself, judges
  *every* resolved address with ``core.addresses.block_reason`` (one bad address blocks the
  host) and then connects to a checked address — never to a name the OS resolves again.
  This is what catches DNS rebinding: the check is on the address actually connected to.
  TLS still verifies the URL's host name (httpcore passes it to ``start_tls``).
- The transport also applies the static URL checks, so nothing can use a guarded client to
  reach ``localhost`` or a metadata host name, whoever calls it.
- ``trust_env=False`` (no proxies or CA bundles from the environment), redirects are never
  followed, ``Accept-Encoding: identity``, at most ``max_per_host`` requests in flight per
  (scheme, host, port).
- Every response body is cut at 16 KiB (for the attempt log); then the connection closes.
- httpcore's exceptions become httpx's here, in :class:`GuardedTransport`, and nowhere else.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import socket
import ssl
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
)
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx
import trio

from appliance.core.addresses import (
    AddressPolicy,
    IPAddress,
    block_reason,
    check_target_url,
    describe_block,
    parse_ip_literal,
)
from appliance.errors import DestinationBlocked, ValidationError

EXCERPT_BYTES = 16 * 1024
DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, write=10.0, read=15.0, pool=5.0)
RESOLVE_TIMEOUT_S = 5.0  # write-time lookups; connect-time ones share the connect timeout
MAX_CONNECTIONS = 100
MAX_KEEPALIVE_CONNECTIONS = 20
KEEPALIVE_EXPIRY_S = 5.0

Resolver = Callable[[str], Awaitable[list[IPAddress]]]
"""Host name -> its addresses; raises :class:`NameNotResolved`. A seam for tests."""


class NameNotResolved(Exception):
    """DNS gave no address for a host name."""


class NameResolutionError(httpx.ConnectError):
    """httpx-level: the host name did not resolve (DNS failure fails closed)."""


class TLSHandshakeError(httpx.ConnectError):
    """httpx-level: the TLS handshake failed (certificate, host name, protocol)."""


class _HostUnresolved(httpcore.ConnectError):
    pass


class _TLSFailed(httpcore.ConnectError):
    pass


async def resolve_host(host: str) -> list[IPAddress]:
    """The host's addresses as the system resolver gives them, without duplicates."""
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise NameNotResolved(f"could not resolve host {host!r} ({exc})") from exc
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise NameNotResolved(f"host {host!r} has no addresses")
    return addresses


def blocked_message(policy: AddressPolicy, host: str, addresses: list[IPAddress]) -> str | None:
    """Why one of ``host``'s addresses is refused, or None when all are allowed."""
    for address in addresses:
        reason = block_reason(policy, address)
        if reason is not None:
            named = None if parse_ip_literal(host) == address else host
            return describe_block(address, reason, host=named)
    return None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses the policy allows."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        resolve: Resolver = resolve_host,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._policy = policy
        self._resolve = resolve
        self._inner = inner if inner is not None else httpcore.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve, check every address, connect to the first checked one that answers.

        Raises DestinationBlocked (not an httpcore error: httpcore passes it through).
        """
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                addresses = await self._addresses(host)
                message = blocked_message(self._policy, host, addresses)
                if message is not None:
                    raise DestinationBlocked(message)
                return await self._connect_any(addresses, port, local_address, socket_options)
        except trio.TooSlowError:
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out") from None

    async def _addresses(self, host: str) -> list[IPAddress]:
        literal = parse_ip_literal(host)
        if literal is not None:
            return [literal]
        try:
            addresses = await self._resolve(host)
        except NameNotResolved as exc:
            raise _HostUnresolved(str(exc)) from exc
        if not addresses:
            raise _HostUnresolved(f"host {host!r} has no addresses")
        return addresses

    async def _connect_any(
        self,
        addresses: list[IPAddress],
        port: int,
        local_address: str | None,
        socket_options: Iterable[Any] | None,
    ) -> httpcore.AsyncNetworkStream:
        error: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(
                    str(address), port, local_address=local_address, socket_options=socket_options
                )
            except httpcore.ConnectError as exc:
                error = exc
                continue
            return _TLSAwareStream(stream)
        assert error is not None  # _addresses never returns an empty list
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise DestinationBlocked("Unix sockets are never delivery targets")

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


class _TLSAwareStream(httpcore.AsyncNetworkStream):
    """Delegates to the connected stream; marks handshake failures so they read as TLS."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream

    # httpcore's stream interface passes timeouts as arguments.
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        try:
            return await self._stream.start_tls(ssl_context, server_hostname, timeout)
        except (httpcore.ConnectError, ssl.SSLError) as exc:
            cause = exc.__cause__ or exc
            raise _TLSFailed(f"TLS handshake with {server_hostname} failed: {cause}") from exc

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


# Most specific first: the first matching row wins.
_EXCEPTION_MAP: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (_HostUnresolved, NameResolutionError),
    (_TLSFailed, TLSHandshakeError),
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)
_HTTPCORE_ERRORS = tuple(source for source, _ in _EXCEPTION_MAP)


@contextlib.contextmanager
def _httpx_exceptions() -> Iterator[None]:
    """Translate httpcore exceptions into httpx's; anything else passes unchanged."""
    try:
        yield
    except _HTTPCORE_ERRORS as exc:
        for source, target in _EXCEPTION_MAP:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


@dataclass(slots=True)
class _HostSlot:
    """Mutable on purpose: the number of tasks using or waiting for this host's semaphore."""

    semaphore: trio.Semaphore
    users: int = 0


class _HostLimiter:
    """At most ``limit`` requests in flight per origin; idle origins are forgotten."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max_per_host must be at least 1")
        self._limit = limit
        self._slots: dict[tuple[str, str, int | None], _HostSlot] = {}

    async def acquire(self, origin: tuple[str, str, int | None]) -> None:
        slot = self._slots.setdefault(origin, _HostSlot(semaphore=trio.Semaphore(self._limit)))
        slot.users += 1
        try:
            await slot.semaphore.acquire()
        except BaseException:
            self._leave(origin, slot)
            raise

    def release(self, origin: tuple[str, str, int | None]) -> None:
        slot = self._slots[origin]
        slot.semaphore.release()
        self._leave(origin, slot)

    def in_use(self) -> int:
        return len(self._slots)

    def _leave(self, origin: tuple[str, str, int | None], slot: _HostSlot) -> None:
        slot.users -= 1
        if slot.users == 0:
            del self._slots[origin]


class _ResponseStream(httpx.AsyncByteStream):
    """The response body, cut off after ``limit`` bytes; closing it frees the origin's slot.

    The cut is made here rather than by the reader breaking out of its loop: httpx and
    httpcore iterate bodies through nested async generators, and a reader that stops early
    leaves the inner ones to the garbage collector (trio then warns, at some later, random
    moment). Instead, at the limit this stream closes the connection and drains what is
    left, so every generator in the chain finishes now.
    """

    def __init__(
        self, stream: AsyncIterable[bytes], *, limit: int, release: Callable[[], None]
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        remaining = self._limit
        parts = aiter(self._stream)
        with _httpx_exceptions():
            while remaining > 0:
                try:
                    part = await anext(parts)
                except StopAsyncIteration:
                    return
                part = part[:remaining]
                remaining -= len(part)
                yield part
            await self._close_stream()
            with contextlib.suppress(httpcore.NetworkError, httpcore.ProtocolError):
                async for _ in parts:  # at most what was already buffered, then an error
                    pass

    async def aclose(self) -> None:
        try:
            with _httpx_exceptions():
                await self._close_stream()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()

    async def _close_stream(self) -> None:
        closer = getattr(self._stream, "aclose", None)
        if closer is not None:
            await closer()


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx transport over an httpcore pool whose every connection is guarded."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        max_per_host: int,
        resolve: Resolver = resolve_host,
        ssl_context: ssl.SSLContext | None = None,
        max_body_bytes: int = EXCERPT_BYTES,
    ) -> None:
        self._policy = policy
        self._hosts = _HostLimiter(max_per_host)
        self._max_body_bytes = max_body_bytes
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(trust_env=False),
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
            network_backend=GuardedBackend(policy, resolve=resolve),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            check_target_url(str(request.url), self._policy)
        except ValidationError as exc:
            raise DestinationBlocked("; ".join(e.message for e in exc.errors)) from None
        origin = (request.url.scheme, request.url.host, request.url.port)
        await self._wait_for_slot(origin, request)
        try:
            response = await self._send(request, origin)
        except BaseException:
            self._hosts.release(origin)
            raise
        return response

    async def _wait_for_slot(
        self, origin: tuple[str, str, int | None], request: httpx.Request
    ) -> None:
        pool_timeout = request.extensions.get("timeout", {}).get("pool")
        try:
            with trio.fail_after(math.inf if pool_timeout is None else pool_timeout):
                await self._hosts.acquire(origin)
        except trio.TooSlowError:
            raise httpx.PoolTimeout(f"too many requests in flight to {origin[1]}") from None

    async def _send(
        self, request: httpx.Request, origin: tuple[str, str, int | None]
    ) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_exceptions():
            response = await self._pool.handle_async_request(core_request)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(
                response.stream,
                limit=self._max_body_bytes,
                release=lambda: self._hosts.release(origin),
            ),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        with _httpx_exceptions():
            await self._pool.aclose()


def build_client(
    policy: AddressPolicy,
    *,
    max_per_host: int = 8,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    resolve: Resolver = resolve_host,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """The delivery client: guarded transport, no redirects, nothing from the environment.

    Build it once and reuse it (building costs an SSL context). ``timeout``, ``resolve`` and
    ``ssl_context`` exist for tests.
    """
    transport = GuardedTransport(
        policy, max_per_host=max_per_host, resolve=resolve, ssl_context=ssl_context
    )
    return httpx.AsyncClient(
        transport=transport,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        headers={"Accept-Encoding": "identity"},
    )
