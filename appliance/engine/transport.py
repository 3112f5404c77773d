"""The guarded delivery transport: httpx's client API over Steeple's own HTTP/1.1 pool.

httpx's default transport costs ≈ 1 ms CPU per request and degrades with concurrency
(measured: docs/performance.md); this one speaks h11 over trio directly
(``engine.h11conn``) and is also where the connect-time address policy is enforced
(``engine.connector``).

Rules:
- Every connection is opened by :class:`~appliance.engine.connector.GuardedConnector`:
  every resolved address is checked and only a checked address is connected to (DNS
  rebinding is caught); TLS verifies the URL's host name. The transport also applies the
  static URL checks, so nothing can use a guarded client to reach ``localhost`` or a
  metadata host name, whoever calls it.
- Nothing from the environment, no redirects, no cookies: requests go straight to the
  transport (:class:`DeliveryClient`); ``core.delivery`` sets every header, including
  ``Accept-Encoding: identity``.
- At most ``max_per_host`` requests in flight per origin (scheme, host, port); at most
  ``max_connections`` connections open in all (an idle one of another origin is closed to
  make room). Waiting longer than the ``pool`` timeout for either is ``httpx.PoolTimeout``.
- Keep-alive: each origin keeps a stack of idle connections (most recently used first);
  at most ``max_idle`` idle in all; one idle for longer than ``idle_expiry_s`` is closed,
  lazily, when the next request comes (no timer task).
- A connection goes back to the pool only after a complete exchange that h11 calls
  reusable. Any error, any cancellation, a body cut short: the connection is closed, so
  no half-used connection is ever lent out again.
- An idle connection is reused only if its socket is quiet (``Connection.is_quiet``: not
  readable, so the server has not closed it). A request is never sent twice: if a reused
  connection fails anyway (the server closed it in the instant between check and use), the
  attempt fails and the run's retry policy decides. Resending a POST the receiver may
  already have processed would be a silent duplicate.
- Every response body is cut at 16 KiB (for the attempt log); the connection is then
  closed unless the response ended within what had already been received.
- The delivery path does not build httpx ``Request``/``Response`` objects at all:
  :meth:`GuardedTransport.exchange` takes the URL, headers and body and returns an
  :class:`Answer` (status, headers, excerpt). Constructing httpx's models — URL parsing,
  header normalisation, the response stream — cost ≈ a quarter of the trio thread's CPU
  per delivery (docs/performance.md). Each target URL is checked and parsed once (cached)
  and the request carries the same bytes httpx would send (``Host`` first,
  ``Content-Length`` last). ``handle_async_request`` keeps the transport usable under any
  httpx client.
"""

from __future__ import annotations

import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

import h11
import httpx
import trio

from appliance.core.addresses import AddressPolicy, check_target_url
from appliance.core.delivery import DeliveryRequest
from appliance.engine.connector import (
    GuardedConnector,
    NameNotResolved,
    NameResolutionError,
    Resolver,
    TLSHandshakeError,
    blocked_message,
    default_ssl_context,
    resolve_host,
)
from appliance.engine.h11conn import Connection
from appliance.errors import DestinationBlocked, ValidationError

__all__ = [
    "DEFAULT_TIMEOUT",
    "EXCERPT_BYTES",
    "RESOLVE_TIMEOUT_S",
    "Answer",
    "DeliveryClient",
    "GuardedTransport",
    "NameNotResolved",
    "NameResolutionError",
    "Resolver",
    "TLSHandshakeError",
    "blocked_message",
    "build_client",
    "resolve_host",
]

EXCERPT_BYTES = 16 * 1024
DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, write=10.0, read=15.0, pool=5.0)
RESOLVE_TIMEOUT_S = 5.0  # write-time lookups; connect-time ones share the connect timeout
MAX_CONNECTIONS = 100
MAX_IDLE_CONNECTIONS = 20
KEEPALIVE_EXPIRY_S = 5.0

Origin = tuple[str, str, int]  # scheme, host, port
Timeouts = Mapping[str, float | None]  # httpx's request.extensions["timeout"]
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NO_TIMEOUTS: Timeouts = {}
_CHECKED_URLS_MAX = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What the receiver said to one request: its status and headers (names lower-case),
    the first ``EXCERPT_BYTES`` of its body, and ``error`` if reading the body failed
    (the status already tells what the receiver decided)."""

    status: int
    headers: Sequence[tuple[bytes, bytes]]
    excerpt: bytes
    error: str | None = None

    def header(self, name: bytes) -> str | None:
        """The first value of header ``name`` (lower-case), decoded as httpx would."""
        for key, value in self.headers:
            if key == name:
                try:
                    return value.decode("utf-8")
                except UnicodeDecodeError:
                    return value.decode("iso-8859-1")
        return None


@dataclass(frozen=True, slots=True)
class _Target:
    """A checked target URL, parsed once: where to connect and what to write."""

    origin: Origin
    netloc: bytes  # the Host header: IDNA host, and the port when it is not the default
    path: bytes  # path and query, as sent


def _body_error(exc: Exception) -> str:
    return f"reading the response body failed: {str(exc) or type(exc).__name__}"


class _OriginState:
    """Mutable on purpose: one origin's turn-taking and its idle connections."""

    __slots__ = ("idle", "turns", "users")

    def __init__(self, max_per_host: int) -> None:
        self.turns = trio.Semaphore(max_per_host)
        self.idle: list[Connection] = []  # a stack: the most recently used on top
        self.users = 0  # tasks holding or waiting for a turn


async def _acquire(semaphore: trio.Semaphore, timeout_s: float | None) -> bool:
    """Take one unit; False when ``timeout_s`` passed first."""
    try:
        semaphore.acquire_nowait()  # the common case: no checkpoint, no cancel scope
        return True
    except trio.WouldBlock:
        pass
    with trio.move_on_after(timeout_s if timeout_s is not None else float("inf")):
        await semaphore.acquire()
        return True
    return False


def _pool_timeout(timeout_s: float | None, what: str) -> httpx.PoolTimeout:
    return httpx.PoolTimeout(f"waited longer than {timeout_s:g} s for {what}")


class ConnectionPool:
    """Lends connections per origin; see the module rules."""

    def __init__(
        self,
        connector: GuardedConnector,
        *,
        max_per_host: int,
        max_connections: int = MAX_CONNECTIONS,
        max_idle: int = MAX_IDLE_CONNECTIONS,
        idle_expiry_s: float = KEEPALIVE_EXPIRY_S,
    ) -> None:
        if max_per_host < 1 or max_connections < 1:
            raise ValueError("max_per_host and max_connections must be at least 1")
        self._connector = connector
        self._max_per_host = max_per_host
        self._max_idle = max_idle
        self._idle_expiry_s = idle_expiry_s
        self._max_connections = max_connections
        # One permit per open connection; max_value turns a double release into an error.
        self._permits = trio.Semaphore(max_connections, max_value=max_connections)
        self._origins: dict[Origin, _OriginState] = {}
        self._idle: OrderedDict[Connection, Origin] = OrderedDict()  # oldest first
        self._closed = False

    def open_connections(self) -> int:
        return self._max_connections - self._permits.value

    def idle_connections(self) -> int:
        return len(self._idle)

    async def acquire(self, origin: Origin, timeouts: Timeouts) -> Connection:
        """A connection to ``origin`` for one exchange; hand it back with :meth:`release`."""
        state = self._origins.get(origin)
        if state is None:
            state = self._origins[origin] = _OriginState(self._max_per_host)
        state.users += 1
        try:
            if not await _acquire(state.turns, timeouts.get("pool")):
                what = f"one of the {self._max_per_host} requests in flight to {origin[1]}"
                raise _pool_timeout(timeouts.get("pool"), what)
        except BaseException:
            self._leave(origin, state)
            raise
        try:
            return self._reuse(state) or await self._open(origin, timeouts)
        except BaseException:
            state.turns.release()
            self._leave(origin, state)
            raise

    def release(self, origin: Origin, conn: Connection, *, complete: bool) -> None:
        """End the exchange; ``complete`` means the response was read to its end."""
        if complete and not self._closed and not self._room_wanted() and conn.start_next_exchange():
            self._park(origin, conn)
        else:
            self._discard(conn)
        state = self._origins[origin]
        state.turns.release()
        self._leave(origin, state)

    def close(self) -> None:
        """Close every idle connection; connections in use close when handed back."""
        self._closed = True
        while self._idle:
            self._evict_oldest()

    def _room_wanted(self) -> bool:
        """At the connection cap with requests waiting: a connection handed back closes so
        that a waiting request can open its own (it may be for another origin)."""
        return self._permits.value == 0 and self._permits.statistics().tasks_waiting > 0

    def _reuse(self, state: _OriginState) -> Connection | None:
        self._expire()
        while state.idle:
            conn = state.idle.pop()
            del self._idle[conn]
            if conn.is_quiet():
                return conn
            self._discard(conn)
        return None

    async def _open(self, origin: Origin, timeouts: Timeouts) -> Connection:
        if self._permits.value == 0 and self._idle:
            self._evict_oldest()  # another origin's idle connection makes room
        if not await _acquire(self._permits, timeouts.get("pool")):
            raise _pool_timeout(timeouts.get("pool"), "a free connection")
        try:
            stream, tcp = await self._connector.open(*origin, timeouts.get("connect"))
        except BaseException:
            self._permits.release()
            raise
        return Connection(stream, tcp)

    def _park(self, origin: Origin, conn: Connection) -> None:
        if len(self._idle) >= self._max_idle:
            self._evict_oldest()
        conn.idle_since = trio.current_time()
        self._idle[conn] = origin
        self._origins[origin].idle.append(conn)

    def _expire(self) -> None:
        oldest_allowed = trio.current_time() - self._idle_expiry_s
        while self._idle and next(iter(self._idle)).idle_since < oldest_allowed:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        conn, origin = self._idle.popitem(last=False)
        state = self._origins[origin]
        state.idle.remove(conn)
        self._discard(conn)
        self._forget_if_unused(origin, state)

    def _discard(self, conn: Connection) -> None:
        conn.close()
        self._permits.release()

    def _leave(self, origin: Origin, state: _OriginState) -> None:
        state.users -= 1
        self._forget_if_unused(origin, state)

    def _forget_if_unused(self, origin: Origin, state: _OriginState) -> None:
        if state.users == 0 and not state.idle:
            del self._origins[origin]


class _Body(httpx.AsyncByteStream):
    """The response body, cut at ``limit`` bytes; the end of it hands the connection back."""

    __slots__ = ("_conn", "_limit", "_origin", "_pool", "_read_timeout_s")

    def __init__(
        self, pool: ConnectionPool, origin: Origin, conn: Connection, *, limit: int,
        read_timeout_s: float | None,
    ) -> None:  # fmt: skip
        self._pool = pool
        self._origin = origin
        self._conn: Connection | None = conn
        self._limit = limit
        self._read_timeout_s = read_timeout_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        remaining = self._limit
        try:
            while (chunk := await conn.receive_body(self._read_timeout_s)) is not None:
                if len(chunk) >= remaining:
                    self._hand_back(complete=conn.body_ends_in_buffer())
                    yield chunk[:remaining]
                    return
                remaining -= len(chunk)
                yield chunk
            self._hand_back(complete=True)
        except BaseException:  # a failure, a cancellation, or the reader closing us early
            self._hand_back(complete=False)
            raise

    async def aclose(self) -> None:
        self._hand_back(complete=False)  # a no-op after a complete read

    def _hand_back(self, *, complete: bool) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.release(self._origin, conn, complete=complete)


def _body_of(request: httpx.Request) -> bytes | httpx.AsyncByteStream:
    stream = request.stream
    if isinstance(stream, httpx.ByteStream):
        return request.content  # read already: head and body go out in one write
    assert isinstance(stream, httpx.AsyncByteStream)
    return stream


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx transport over a pool of h11 connections whose every connection is guarded."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        max_per_host: int,
        resolve: Resolver = resolve_host,
        ssl_context: ssl.SSLContext | None = None,
        max_body_bytes: int = EXCERPT_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        max_idle: int = MAX_IDLE_CONNECTIONS,
    ) -> None:
        self._policy = policy
        self._max_body_bytes = max_body_bytes
        self._targets: dict[str, _Target] = {}  # passed the static checks, parsed
        connector = GuardedConnector(
            policy, ssl_context=ssl_context or default_ssl_context(), resolve=resolve
        )
        self.pool = ConnectionPool(
            connector,
            max_per_host=max_per_host,
            max_connections=max_connections,
            max_idle=max_idle,
        )

    async def exchange(
        self,
        url: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        timeouts: Timeouts,
    ) -> Answer:
        """POST ``body`` to ``url`` with ``headers`` (plus ``Host`` and ``Content-Length``)
        and read the answer, its body cut at the excerpt size. Raises what
        :meth:`handle_async_request` raises (httpx transport errors, DestinationBlocked),
        except for a failure while reading the body, which the Answer reports."""
        target = self._target(url)
        framed = [(b"Host", target.netloc)]
        framed += [(name.encode("ascii"), value.encode("ascii")) for name, value in headers]
        framed.append((b"Content-Length", b"%d" % len(body)))
        head, stream = await self._send(target.origin, "POST", target.path, framed, body, timeouts)
        received, error = bytearray(), None
        try:
            async for chunk in stream:
                received += chunk
        except httpx.TransportError as exc:
            error = _body_error(exc)
        return Answer(status=head.status_code, headers=head.headers, excerpt=bytes(received),
                      error=error)  # fmt: skip

    def _target(self, url: str) -> _Target:
        """``url`` checked against the static rules and parsed; cached (both are pure)."""
        target = self._targets.get(url)
        if target is None:
            try:
                check_target_url(url, self._policy)
            except ValidationError as exc:
                raise DestinationBlocked("; ".join(e.message for e in exc.errors)) from None
            parsed = httpx.URL(url)
            scheme = parsed.scheme
            origin = (
                scheme,
                parsed.raw_host.decode("ascii"),
                parsed.port or _DEFAULT_PORTS[scheme],
            )
            target = _Target(origin, parsed.netloc, parsed.raw_path)
            if len(self._targets) >= _CHECKED_URLS_MAX:
                self._targets.clear()
            self._targets[url] = target
        return target

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = self._target(str(request.url))
        timeouts: Timeouts = request.extensions.get("timeout") or _NO_TIMEOUTS
        head, stream = await self._send(
            target.origin, request.method, request.url.raw_path, request.headers.raw,
            _body_of(request), timeouts,
        )  # fmt: skip
        return httpx.Response(
            status_code=head.status_code,
            headers=head.headers.raw_items(),
            stream=stream,
            extensions={"http_version": b"HTTP/" + head.http_version,
                        "reason_phrase": head.reason},
        )  # fmt: skip

    async def _send(
        self,
        origin: Origin,
        method: str,
        path: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes | httpx.AsyncByteStream,
        timeouts: Timeouts,
    ) -> tuple[h11.Response, _Body]:
        """One exchange up to the response head; the body streams from the returned
        :class:`_Body`, whose end (or ``aclose``) hands the connection back."""
        conn = await self.pool.acquire(origin, timeouts)
        try:
            await conn.send_request(method, path, headers, body, timeouts.get("write"))
            head = await conn.receive_head(timeouts.get("read"))
        except BaseException:
            self.pool.release(origin, conn, complete=False)
            raise
        stream = _Body(
            self.pool, origin, conn, limit=self._max_body_bytes,
            read_timeout_s=timeouts.get("read"),
        )  # fmt: skip
        return head, stream

    async def aclose(self) -> None:
        self.pool.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryClient:
    """What the delivery path sends with: one transport and its timeouts.

    No ``httpx.AsyncClient``: it adds URL merging, header merging, cookies, auth and
    redirect handling per request — about half the CPU of a delivery
    (docs/performance.md) — and Steeple wants none of them (no redirects, no cookies,
    headers fixed by ``core.delivery``). Over a :class:`GuardedTransport` not even httpx's
    models are built (:meth:`exchange`).
    """

    transport: httpx.AsyncBaseTransport
    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)
    _timeouts: Timeouts = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_timeouts", self.timeout.as_dict())

    async def exchange(self, request: DeliveryRequest) -> Answer:
        """POST one delivery request: natively over a :class:`GuardedTransport`; over
        any other transport (tests' ``httpx.MockTransport``) through httpx's models."""
        if isinstance(self.transport, GuardedTransport):
            return await self.transport.exchange(
                request.url, request.headers, request.body, self._timeouts
            )
        return await self._exchange_via_httpx(request)

    async def _exchange_via_httpx(self, request: DeliveryRequest) -> Answer:
        outgoing = httpx.Request(
            "POST", request.url, headers=request.headers, content=request.body,
            extensions={"timeout": self._timeouts},
        )  # fmt: skip
        response = await self.transport.handle_async_request(outgoing)
        received, error = bytearray(), None
        try:
            async for chunk in response.aiter_raw():
                received += chunk
        except httpx.StreamConsumed:  # a response built whole (MockTransport), read already
            received += response.content
        except httpx.TransportError as exc:
            error = _body_error(exc)
        finally:
            await response.aclose()
        headers = [(name.lower(), value) for name, value in response.headers.raw]
        return Answer(status=response.status_code, headers=headers,
                      excerpt=bytes(received[:EXCERPT_BYTES]), error=error)  # fmt: skip

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> DeliveryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def build_client(
    policy: AddressPolicy,
    *,
    max_per_host: int = 8,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    resolve: Resolver = resolve_host,
    ssl_context: ssl.SSLContext | None = None,
) -> DeliveryClient:
    """The delivery client over the guarded transport. Build it once and reuse it
    (building costs an SSL context). ``timeout``, ``resolve`` and ``ssl_context`` exist
    for tests."""
    transport = GuardedTransport(
        policy, max_per_host=max_per_host, resolve=resolve, ssl_context=ssl_context
    )
    return DeliveryClient(transport=transport, timeout=timeout)
