"""The guarded outbound transport against real loopback servers (no other network).

Each test fails if a promise of ADR 0032's transport or SSRF sections breaks: blocked
addresses are refused at connect time (the server sees nothing), DNS rebinding is caught,
redirects are not followed, the excerpt is capped, and every transport problem maps to its
TransportFailure instead of raising.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from appliance.core.addresses import AddressPolicy, IPAddress
from appliance.core.delivery import DeliveryRequest
from appliance.core.retry import TransportFailure
from appliance.engine.connector import GuardedConnector
from appliance.engine.outbound import check_destination, send
from appliance.engine.transport import (
    DEFAULT_TIMEOUT,
    EXCERPT_BYTES,
    KEEPALIVE_EXPIRY_S,
    ConnectionPool,
    DeliveryClient,
    GuardedTransport,
    NameNotResolved,
    build_client,
    resolve_host,
)
from appliance.errors import DestinationBlocked, ValidationError

OPEN = AddressPolicy()
LOOPBACK_ALLOWED = AddressPolicy.parse(["127.0.0.0/8"])
BODY = b'{"hello": "receiver"}'
SSL = ssl.create_default_context()  # for connectors that never reach TLS

Reply = Callable[[trio.SocketStream], Awaitable[None]]


@dataclass
class Receiver:
    """A loopback HTTP/1.1 server that records each request head and body."""

    port: int = 0
    requests: list[bytes] = field(default_factory=list)

    def url(self, host: str = "127.0.0.1", path: str = "/hook") -> str:
        return f"http://{host}:{self.port}{path}"


async def read_request(stream: trio.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some()
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
         if line.startswith(b"content-length:")),
        0,
    )  # fmt: skip
    while len(body) < length:
        body += await stream.receive_some()
    return head + b"\r\n\r\n" + body


def canned(status: str, headers: Iterable[tuple[str, str]] = (), body: bytes = b"") -> Reply:
    async def reply(stream: trio.SocketStream) -> None:
        lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers]
        await stream.send_all("\r\n".join(lines).encode() + b"\r\n\r\n" + body)

    return reply


@contextlib.asynccontextmanager
async def receiver(reply: Reply, *, read_first: bool = True) -> AsyncIterator[Receiver]:
    """Serve on 127.0.0.1; ``read_first=False`` replies without waiting for a request."""
    rx = Receiver()

    async def handle(stream: trio.SocketStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            if read_first:
                rx.requests.append(await read_request(stream))
            await reply(stream)

    async with trio.open_nursery() as nursery:
        listeners: list[trio.SocketListener] = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        )
        rx.port = listeners[0].socket.getsockname()[1]
        yield rx
        nursery.cancel_scope.cancel()


def delivery(url: str) -> DeliveryRequest:
    return DeliveryRequest(
        url=url,
        headers=(("Content-Type", "application/json"), ("X-Test", "yes")),
        body=BODY,
    )


def fake_dns(table: dict[str, list[str]]) -> Callable[[str], Awaitable[list[IPAddress]]]:
    async def resolve(host: str) -> list[IPAddress]:
        if host not in table:
            raise NameNotResolved(f"could not resolve host {host!r}")
        return [ipaddress.ip_address(a) for a in table[host]]

    return resolve


# --- the SSRF guard at connect time --------------------------------------------------


async def test_loopback_is_blocked_by_default_and_the_server_sees_nothing() -> None:
    async with receiver(canned("200 OK")) as rx, build_client(OPEN) as client:
        result = await send(client, delivery(rx.url()))
    assert result.failure is TransportFailure.BLOCKED
    assert result.status is None
    assert result.error is not None and "127.0.0.1 is a loopback address" in result.error
    assert rx.requests == []


async def test_allow_listed_loopback_delivery_succeeds() -> None:
    async with (
        receiver(canned("200 OK", body=b"thanks")) as rx,
        build_client(LOOPBACK_ALLOWED) as client,
    ):
        result = await send(client, delivery(rx.url()))
    assert (result.status, result.failure, result.error, result.excerpt) == (
        200, None, None, "thanks",
    )  # fmt: skip
    [raw] = rx.requests
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /hook HTTP/1.1")
    assert body == BODY
    lines = head.lower().split(b"\r\n")
    assert b"x-test: yes" in lines  # the request's headers, exactly (core.delivery sets them)
    assert result.latency_ms >= 0


async def test_rebinding_name_is_checked_on_the_address_actually_connected_to() -> None:
    # The name passes the static check; only connect-time resolution shows it is loopback.
    rebind = fake_dns({"rebind.example": ["127.0.0.1"]})
    async with receiver(canned("204 No Content")) as rx:
        async with build_client(OPEN, resolve=rebind) as client:
            blocked = await send(client, delivery(rx.url("rebind.example")))
        assert blocked.failure is TransportFailure.BLOCKED
        assert blocked.error == (
            "rebind.example resolves to 127.0.0.1, which is a loopback address; Steeple only "
            "delivers to public addresses unless the operator allows it with --allow-target"
        )
        assert rx.requests == []

        async with build_client(LOOPBACK_ALLOWED, resolve=rebind) as client:
            allowed = await send(client, delivery(rx.url("rebind.example")))
    assert allowed.status == 204
    # Connected to the checked address, yet the request still names the host.
    assert f"host: rebind.example:{rx.port}".encode() in rx.requests[0].lower().split(b"\r\n")


async def test_an_internationalised_name_is_resolved_in_its_ascii_form() -> None:
    dns = fake_dns({"xn--bcher-kva.example": ["127.0.0.1"]})
    async with receiver(canned("200 OK")) as rx, build_client(LOOPBACK_ALLOWED, resolve=dns) as c:
        result = await send(c, delivery(rx.url("bücher.example")))
    assert (result.status, result.error) == (200, None)


@dataclass
class RecordingTCP:
    """Stands in for the socket layer: records which addresses it was asked to connect to
    and refuses every connection after the first ``answer`` ones."""

    answer: int = 0
    connected: list[str] = field(default_factory=list)

    async def __call__(self, address: IPAddress, port: int) -> trio.SocketStream:
        self.connected.append(str(address))
        if len(self.connected) > self.answer:
            raise ConnectionRefusedError(111, "Connection refused")
        near, far = socket.socketpair()
        far.close()
        return trio.SocketStream(trio.socket.from_stdlib_socket(near))


def connector(policy: AddressPolicy, tcp: RecordingTCP, **dns: list[str]) -> GuardedConnector:
    table = {name.replace("_", "."): addresses for name, addresses in dns.items()}
    return GuardedConnector(policy, resolve=fake_dns(table), connect=tcp, ssl_context=SSL)


async def test_one_blocked_address_blocks_the_host_before_any_connection() -> None:
    tcp = RecordingTCP(answer=1)
    guarded = connector(OPEN, tcp, mixed_example=["8.8.8.8", "10.0.0.7"])
    with pytest.raises(DestinationBlocked, match=r"mixed\.example resolves to 10\.0\.0\.7"):
        await guarded.connect_tcp("mixed.example", 443)
    assert tcp.connected == []


async def test_connector_connects_to_the_checked_address_not_the_name() -> None:
    tcp = RecordingTCP(answer=1)
    guarded = connector(OPEN, tcp, public_example=["2606:4700::1", "8.8.8.8"])
    stream = await guarded.connect_tcp("public.example", 443)
    await stream.aclose()
    assert tcp.connected == ["2606:4700::1"]


async def test_connector_tries_the_next_checked_address_when_one_refuses() -> None:
    tcp = RecordingTCP(answer=0)
    guarded = connector(OPEN, tcp, public_example=["2606:4700::1", "8.8.8.8"])
    with pytest.raises(httpx.ConnectError, match="Connection refused"):
        await guarded.connect_tcp("public.example", 443)
    assert tcp.connected == ["2606:4700::1", "8.8.8.8"]


async def test_embedded_loopback_and_metadata_literals_are_blocked_at_connect() -> None:
    tcp = RecordingTCP(answer=1)
    everything = AddressPolicy(
        allow=(ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    )
    with pytest.raises(DestinationBlocked, match="loopback address: it embeds"):
        await connector(OPEN, tcp).connect_tcp("::ffff:127.0.0.1", 80)
    with pytest.raises(DestinationBlocked, match="cloud metadata address"):
        await connector(everything, tcp).connect_tcp("169.254.169.254", 80)
    assert tcp.connected == []


async def test_guarded_client_refuses_localhost_names_whoever_calls_it() -> None:
    async with build_client(LOOPBACK_ALLOWED) as client:
        with pytest.raises(DestinationBlocked, match="names the appliance's own machine"):
            await over(client).get("http://localhost:9/")
        result = await send(client, delivery("http://metadata.google.internal/"))
    assert result.failure is TransportFailure.BLOCKED


# --- responses -----------------------------------------------------------------------


async def test_redirect_is_not_followed_and_location_is_kept() -> None:
    reply = canned("302 Found", [("Location", "/elsewhere")])
    async with receiver(reply) as rx, build_client(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert (result.status, result.location, result.failure) == (302, "/elsewhere", None)
    assert len(rx.requests) == 1


async def test_retry_after_is_reported() -> None:
    reply = canned("429 Too Many Requests", [("Retry-After", "120")], b"slow down")
    async with receiver(reply) as rx, build_client(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert (result.status, result.retry_after, result.excerpt) == (429, "120", "slow down")


async def test_response_excerpt_is_capped_at_16_kib() -> None:
    reply = canned("500 Internal Server Error", body=b"x" * (EXCERPT_BYTES * 6 + 5))
    async with receiver(reply) as rx, build_client(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert result.status == 500
    assert result.excerpt == "x" * EXCERPT_BYTES


async def test_undecodable_excerpt_is_replaced_not_raised() -> None:
    async with (
        receiver(canned("200 OK", body=b"\xff\xfeok")) as rx,
        build_client(LOOPBACK_ALLOWED) as client,
    ):
        result = await send(client, delivery(rx.url()))
    assert result.excerpt == "\ufffd\ufffdok"


# --- transport failures map to TransportFailure ---------------------------------------


async def test_read_timeout_maps_to_timeout() -> None:
    never = trio.Event()

    async def hang(stream: trio.SocketStream) -> None:
        await never.wait()

    async with (
        receiver(hang) as rx,
        build_client(LOOPBACK_ALLOWED, timeout=httpx.Timeout(0.2)) as client,
    ):
        result = await send(client, delivery(rx.url()))
    assert result.failure is TransportFailure.TIMEOUT
    assert len(rx.requests) == 1
    assert result.latency_ms >= 200


async def test_connection_refused_maps_to_connect() -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        async with build_client(LOOPBACK_ALLOWED) as client:
            result = await send(client, delivery(f"http://127.0.0.1:{port}/"))
    assert result.failure is TransportFailure.CONNECT
    assert result.status is None


async def test_dns_failure_maps_to_dns() -> None:
    async with build_client(OPEN, resolve=fake_dns({})) as client:
        result = await send(client, delivery("https://gone.example/hook"))
    assert result.failure is TransportFailure.DNS
    assert result.error == "could not resolve host 'gone.example'"


async def test_tls_handshake_failure_maps_to_tls() -> None:
    # Plain HTTP where TLS is expected: the handshake fails.
    async with receiver(canned("400 Bad Request"), read_first=False) as rx:
        async with build_client(LOOPBACK_ALLOWED) as client:
            result = await send(client, delivery(f"https://127.0.0.1:{rx.port}/"))
    assert result.failure is TransportFailure.TLS
    assert result.error is not None and "TLS handshake with 127.0.0.1 failed" in result.error


async def test_garbage_response_maps_to_protocol() -> None:
    async def garbage(stream: trio.SocketStream) -> None:
        await stream.send_all(b"this is not HTTP\r\n\r\n")

    async with receiver(garbage) as rx, build_client(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert result.failure is TransportFailure.PROTOCOL


async def test_at_most_max_per_host_requests_are_in_flight() -> None:
    release = trio.Event()
    ok = canned("200 OK")

    async def held(stream: trio.SocketStream) -> None:
        await release.wait()
        await ok(stream)

    results = []

    async def deliver(client: httpx.AsyncClient, url: str) -> None:
        results.append(await send(client, delivery(url)))

    async with receiver(held) as rx, build_client(LOOPBACK_ALLOWED, max_per_host=2) as client:
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(deliver, client, rx.url())
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            assert len(rx.requests) == 2
            release.set()
    assert [r.status for r in results] == [200] * 4
    assert len(rx.requests) == 4


async def test_cancellation_propagates() -> None:
    never = trio.Event()

    async def hang(stream: trio.SocketStream) -> None:
        await never.wait()

    async with receiver(hang) as rx, build_client(LOOPBACK_ALLOWED) as client:
        with trio.move_on_after(0.1) as scope:
            await send(client, delivery(rx.url()))
    assert scope.cancelled_caught


# --- the connection pool: keep-alive, reuse only when safe, caps, expiry --------------

Respond = Callable[[int], Awaitable[tuple[bytes, bool]]]
"""Request number (from 1, over all connections) -> (raw reply, keep the connection open)."""


def response(body: bytes = b"ok", *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + body


async def answer_ok(n: int) -> tuple[bytes, bool]:
    return response(), True


@dataclass
class KeepAliveServer:
    """A loopback server that serves many requests per connection and records, for each
    request, the number of the connection (from 1) it came on."""

    port: int = 0
    on_connection: list[int] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)  # each request as received
    ended: dict[int, trio.Event] = field(default_factory=dict)  # connection closed
    arrived: trio.Event = field(default_factory=trio.Event)  # a request came in

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/hook"

    async def wait_ended(self, connection: int) -> None:
        """Assert the connection has ended once everything settled. Loopback delivers a
        close at once; no timeout, so this also works under a MockClock that stands still."""
        await trio.testing.wait_all_tasks_blocked()
        assert self.ended[connection].is_set(), f"connection {connection} is still open"


@contextlib.asynccontextmanager
async def keep_alive_server(respond: Respond = answer_ok) -> AsyncIterator[KeepAliveServer]:
    server = KeepAliveServer()

    async def handle(stream: trio.SocketStream) -> None:
        number = len(server.ended) + 1
        server.ended[number] = trio.Event()
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while raw := await read_request(stream):
                server.on_connection.append(number)
                server.bodies.append(raw.partition(b"\r\n\r\n")[2])
                server.raw.append(raw)
                server.arrived.set()
                reply, keep = await respond(len(server.on_connection))
                await stream.send_all(reply)
                if not keep:
                    break
        await stream.aclose()
        server.ended[number].set()

    async with trio.open_nursery() as nursery:
        listeners: list[trio.SocketListener] = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        )
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def pooled_client(
    policy: AddressPolicy = LOOPBACK_ALLOWED,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,  # noqa: ASYNC109  (httpx.Timeout, not a deadline)
    **options: Any,
) -> AsyncIterator[tuple[DeliveryClient, ConnectionPool]]:
    """build_client's client, with its pool in view."""
    transport = GuardedTransport(policy, **{"max_per_host": 8, **options})
    async with DeliveryClient(transport=transport, timeout=timeout) as client:
        yield client, transport.pool


def over(client: DeliveryClient) -> httpx.AsyncClient:
    """httpx's full client over the same transport, to drive the transport with requests
    the delivery path never makes (GET, streamed bodies). Closing the delivery client
    closes the transport."""
    return httpx.AsyncClient(transport=client.transport, timeout=client.timeout)


async def delivered(client: DeliveryClient, url: str) -> int | None:
    result = await send(client, delivery(url))
    assert result.error is None, result.error
    return result.status


@pytest.mark.parametrize("host", ["127.0.0.1", "hooks.example"])
async def test_the_native_exchange_sends_the_bytes_httpx_would(host: str) -> None:
    """The delivery path frames requests itself (no httpx models); on the wire they are
    byte for byte what httpx's Request over the same transport sends: Host first (with
    the port), the delivery's headers in order, Content-Length last, then the body."""
    resolve = fake_dns({"hooks.example": ["127.0.0.1"]})
    async with keep_alive_server() as server, pooled_client(resolve=resolve) as (client, _):
        request = delivery(server.url(host) + "?a=1&b=%20")
        native = await send(client, request)
        via_httpx = await client._exchange_via_httpx(request)
        assert native.status == via_httpx.status == 200
    assert len(server.raw) == 2 and server.raw[0] == server.raw[1]
    head = server.raw[0].split(b"\r\n")
    assert head[0] == b"POST /hook?a=1&b=%20 HTTP/1.1"
    assert head[1] == f"Host: {host}:{server.port}".encode()
    assert head[-3] == f"Content-Length: {len(request.body)}".encode()


async def test_sequential_deliveries_reuse_one_keep_alive_connection() -> None:
    async with keep_alive_server() as server, pooled_client() as (client, pool):
        for _ in range(3):
            assert await delivered(client, server.url()) == 200
        assert (pool.open_connections(), pool.idle_connections()) == (1, 1)
    assert server.on_connection == [1, 1, 1]
    assert server.bodies == [BODY] * 3


async def test_a_connection_the_server_closed_while_idle_is_never_reused() -> None:
    async def close_after_first(n: int) -> tuple[bytes, bool]:
        return response(), n > 1  # no "Connection: close": the server just hangs up

    async with keep_alive_server(close_after_first) as server, pooled_client() as (client, _):
        assert await delivered(client, server.url()) == 200
        await server.wait_ended(1)
        # The idle socket is readable (EOF): the pool drops it instead of sending on it,
        # so the delivery neither fails nor is sent twice.
        assert await delivered(client, server.url()) == 200
    assert server.on_connection == [1, 2]


async def test_connection_close_in_the_response_is_honoured() -> None:
    async def say_close(n: int) -> tuple[bytes, bool]:
        return response(b"ok", "Connection: close"), True  # but the server keeps it open

    async with keep_alive_server(say_close) as server, pooled_client() as (client, pool):
        assert await delivered(client, server.url()) == 200
        await server.wait_ended(1)  # the client closed it
        assert (pool.open_connections(), pool.idle_connections()) == (0, 0)
        assert await delivered(client, server.url()) == 200
    assert server.on_connection == [1, 2]


@pytest.mark.parametrize(
    ("size", "reused"),
    [(EXCERPT_BYTES, True), (EXCERPT_BYTES * 8, False)],
)
async def test_a_body_cut_at_the_excerpt_closes_the_connection(size: int, reused: bool) -> None:
    async def big(n: int) -> tuple[bytes, bool]:
        return response(b"x" * size), True

    async with keep_alive_server(big) as server, pooled_client() as (client, _):
        for _ in range(2):
            result = await send(client, delivery(server.url()))
            assert (result.status, result.error, len(result.excerpt)) == (200, None, EXCERPT_BYTES)
    assert server.on_connection == ([1, 1] if reused else [1, 2])


async def test_idle_connections_expire(mock_clock: trio.testing.MockClock) -> None:
    # mock_clock: virtual time stands still unless jumped, so real sockets work as usual.
    async with keep_alive_server() as server, pooled_client() as (client, pool):
        await delivered(client, server.url())
        mock_clock.jump(KEEPALIVE_EXPIRY_S - 0.5)
        await delivered(client, server.url())
        assert server.on_connection == [1, 1]
        mock_clock.jump(KEEPALIVE_EXPIRY_S + 0.5)
        await delivered(client, server.url())
        assert server.on_connection == [1, 1, 2]
        await server.wait_ended(1)
        assert pool.open_connections() == 1


async def test_at_the_connection_cap_an_idle_connection_of_another_origin_is_closed() -> None:
    async with (
        keep_alive_server() as a,
        keep_alive_server() as b,
        pooled_client(max_connections=1) as (client, pool),
    ):
        await delivered(client, a.url())
        await delivered(client, b.url())
        await a.wait_ended(1)
        assert (pool.open_connections(), pool.idle_connections()) == (1, 1)


async def test_at_the_connection_cap_a_request_waits_for_the_pool_timeout() -> None:
    release = trio.Event()

    async def held(n: int) -> tuple[bytes, bool]:
        await release.wait()
        return response(), True

    timeout = httpx.Timeout(5.0, pool=0.2)
    async with (
        keep_alive_server(held) as a,
        keep_alive_server() as b,
        pooled_client(timeout=timeout, max_connections=1) as (client, _),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(delivered, client, a.url())
        await a.arrived.wait()
        with pytest.raises(httpx.PoolTimeout, match="a free connection"):
            await over(client).post(b.url())
        result = await send(client, delivery(b.url()))
        assert result.failure is TransportFailure.TIMEOUT
        release.set()
    assert b.on_connection == []


async def test_at_the_connection_cap_a_handed_back_connection_makes_room() -> None:
    release = trio.Event()

    async def held(n: int) -> tuple[bytes, bool]:
        await release.wait()
        return response(), True

    statuses: list[int | None] = []

    async def deliver_to_b(url: str) -> None:
        statuses.append(await delivered(client, url))

    async with (
        keep_alive_server(held) as a,
        keep_alive_server() as b,
        pooled_client(max_connections=1) as (client, pool),
    ):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(delivered, client, a.url())
            await a.arrived.wait()
            nursery.start_soon(deliver_to_b, b.url())
            await trio.testing.wait_all_tasks_blocked()
            release.set()  # a's connection comes back while b waits: it closes, b connects
        await a.wait_ended(1)
        assert (statuses, b.on_connection, pool.open_connections()) == ([200], [1], 1)


async def test_waiting_for_a_turn_at_one_origin_honours_the_pool_timeout() -> None:
    release = trio.Event()

    async def held(n: int) -> tuple[bytes, bool]:
        await release.wait()
        return response(), True

    timeout = httpx.Timeout(5.0, pool=0.2)
    async with (
        keep_alive_server(held) as server,
        pooled_client(timeout=timeout, max_per_host=1) as (client, _),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(delivered, client, server.url())
        await server.arrived.wait()
        with pytest.raises(httpx.PoolTimeout, match=r"requests in flight to 127\.0\.0\.1"):
            await over(client).post(server.url())
        release.set()
    assert server.on_connection == [1]


@pytest.mark.parametrize("sent_before_hanging", [b"", response(b"x" * 100)[:-50]])
async def test_a_cancelled_delivery_leaves_no_connection_behind(sent_before_hanging: bytes) -> None:
    never = trio.Event()

    async def first_hangs(n: int) -> tuple[bytes, bool]:
        if n == 1:
            await never.wait()
        return response(), True

    async def hang_after_part(n: int) -> tuple[bytes, bool]:
        return (sent_before_hanging if n == 1 else response()), True

    respond = hang_after_part if sent_before_hanging else first_hangs
    async with keep_alive_server(respond) as server, pooled_client() as (client, pool):
        with trio.move_on_after(0.2) as scope:
            await send(client, delivery(server.url()))
        assert scope.cancelled_caught
        assert (pool.open_connections(), pool.idle_connections()) == (0, 0)
        assert await delivered(client, server.url()) == 200
    assert server.on_connection == [1, 2]


async def test_server_hanging_up_without_an_answer_is_a_protocol_failure() -> None:
    async def hang_up(n: int) -> tuple[bytes, bool]:
        return b"", False

    async with keep_alive_server(hang_up) as server, pooled_client() as (client, pool):
        result = await send(client, delivery(server.url()))
        assert pool.open_connections() == 0
    assert result.failure is TransportFailure.PROTOCOL
    assert result.error == "the server closed the connection without answering"


async def test_a_truncated_body_is_reported_with_the_status() -> None:
    async def truncated(n: int) -> tuple[bytes, bool]:
        return response(b"x" * 100)[:-90], False

    async with keep_alive_server(truncated) as server, pooled_client() as (client, pool):
        result = await send(client, delivery(server.url()))
        assert pool.open_connections() == 0
    assert (result.status, result.failure, result.excerpt) == (200, None, "x" * 10)
    assert result.error is not None and result.error.startswith("reading the response body")


async def test_a_body_framed_by_the_connection_closing_is_read_whole() -> None:
    async def until_close(n: int) -> tuple[bytes, bool]:
        return b"HTTP/1.1 200 OK\r\n\r\nuntil the end", False

    async with keep_alive_server(until_close) as server, pooled_client() as (client, pool):
        result = await send(client, delivery(server.url()))
        assert pool.open_connections() == 0
    assert (result.status, result.excerpt, result.error) == (200, "until the end", None)


async def test_interim_responses_are_skipped() -> None:
    async def continue_first(n: int) -> tuple[bytes, bool]:
        return b"HTTP/1.1 100 Continue\r\n\r\n" + response(b"done"), True

    async with keep_alive_server(continue_first) as server, pooled_client() as (client, _):
        result = await send(client, delivery(server.url()))
    assert (result.status, result.excerpt) == (200, "done")


async def test_write_timeout_maps_to_timeout() -> None:
    never = trio.Event()

    async def never_reads(stream: trio.SocketStream) -> None:
        await never.wait()

    huge = b"x" * (64 * 1024 * 1024)  # more than the loopback socket buffers hold
    timeout = httpx.Timeout(5.0, write=0.2)
    async with (
        receiver(never_reads, read_first=False) as rx,
        pooled_client(timeout=timeout) as (client, pool),
    ):
        with pytest.raises(httpx.WriteTimeout):
            await over(client).post(rx.url(), content=huge)
        assert pool.open_connections() == 0


async def test_connect_timeout_covers_name_resolution(autojump_clock: Any) -> None:
    async def stuck(host: str) -> list[IPAddress]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with pooled_client(OPEN, resolve=stuck) as (client, pool):
        with pytest.raises(httpx.ConnectTimeout, match=r"connecting to slow\.example:443"):
            await over(client).post("https://slow.example/")
        result = await send(client, delivery("https://slow.example/"))
        assert (pool.open_connections(), result.failure) == (0, TransportFailure.TIMEOUT)


async def test_a_streamed_request_body_is_sent_chunked() -> None:
    async def chunked(stream: trio.SocketStream) -> None:
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            data += await stream.receive_some()
        await stream.send_all(response(data.partition(b"\r\n\r\n")[2]))

    async def parts() -> AsyncIterator[bytes]:
        yield b"one"
        yield b"two"

    async with receiver(chunked, read_first=False) as rx, pooled_client() as (client, _):
        reply = await over(client).post(rx.url(), content=parts())
    assert reply.content == b"3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n"


# --- TLS over the checked address --------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA and a leaf certificate for hook.example, made with the openssl tool."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("tls")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (d / "leaf.ext").write_text(
        "subjectAltName=DNS:hook.example\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
    )
    for command in (
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=Steeple test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign"],
        ["req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=hook.example"],
        ["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext"],
    ):  # fmt: skip
        subprocess.run(["openssl", *command], cwd=d, check=True, capture_output=True)
    return Certificates(ca=d / "ca.pem", cert=d / "leaf.pem", key=d / "leaf.key")


@contextlib.asynccontextmanager
async def tls_server(certs: Certificates) -> AsyncIterator[KeepAliveServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.cert, certs.key)
    server = KeepAliveServer()

    async def handle(stream: trio.SSLStream[trio.SocketStream]) -> None:
        number = len(server.ended) + 1
        server.ended[number] = trio.Event()
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await read_request(stream):  # type: ignore[arg-type]
                server.on_connection.append(number)
                await stream.send_all(response(b"secure"))
        server.ended[number].set()

    async with trio.open_nursery() as nursery:
        listeners: list[trio.SSLListener[trio.SocketStream]] = await nursery.start(
            functools.partial(trio.serve_ssl_over_tcp, handle, 0, context, host="127.0.0.1")
        )
        server.port = listeners[0].transport_listener.socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


async def test_tls_verifies_the_url_host_over_the_checked_address(certs: Certificates) -> None:
    trusted = ssl.create_default_context(cafile=certs.ca)
    dns = fake_dns({"hook.example": ["127.0.0.1"], "other.example": ["127.0.0.1"]})
    async with (
        tls_server(certs) as server,
        pooled_client(resolve=dns, ssl_context=trusted) as (client, pool),
    ):
        for _ in range(2):
            result = await send(client, delivery(f"https://hook.example:{server.port}/"))
            assert (result.status, result.excerpt) == (200, "secure")
        assert server.on_connection == [1, 1]  # kept alive over TLS too
        wrong = await send(client, delivery(f"https://other.example:{server.port}/"))
        assert wrong.failure is TransportFailure.TLS
        assert wrong.error is not None and "other.example" in wrong.error
        assert pool.open_connections() == 1


# --- write-time check ------------------------------------------------------------------


def field_message(caught: pytest.ExceptionInfo[ValidationError]) -> str:
    [error] = caught.value.errors
    assert error.field == "target_url"
    return error.message


async def test_check_destination_refuses_names_resolving_to_private_addresses() -> None:
    dns = fake_dns({"intranet.example": ["10.0.0.1"], "hooks.example": ["93.184.215.14"]})
    with pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "https://intranet.example/x", resolve=dns)
    assert field_message(caught).startswith(
        "intranet.example resolves to 10.0.0.1, which is a private address (RFC 1918)"
    )
    await check_destination(OPEN, "https://hooks.example/x", resolve=dns)
    await check_destination(AddressPolicy.parse(["10.0.0.0/8"]), "https://intranet.example/x",
                            resolve=dns)  # fmt: skip


async def test_check_destination_fails_closed_on_dns_failure() -> None:
    with pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "https://nowhere.example/", resolve=fake_dns({}))
    assert field_message(caught) == (
        "could not resolve host 'nowhere.example'; Steeple refuses destinations it cannot resolve"
    )


async def test_check_destination_fails_closed_on_slow_dns(autojump_clock: Any) -> None:
    async def stuck(host: str) -> list[IPAddress]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    with pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "https://slow.example/", resolve=stuck)
    assert "took longer than 5 s" in field_message(caught)


async def test_check_destination_applies_static_rules_first() -> None:
    with pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "http://127.0.0.1:8000/", resolve=fake_dns({}))
    assert "127.0.0.1 is a loopback address" in field_message(caught)
    await check_destination(LOOPBACK_ALLOWED, "http://127.0.0.1:8000/", resolve=fake_dns({}))


async def test_system_resolver_answers_offline_for_numeric_and_hosts_file_names() -> None:
    assert await resolve_host("127.0.0.1") == [ipaddress.ip_address("127.0.0.1")]
    assert all(address.is_loopback for address in await resolve_host("localhost"))


async def test_send_reads_a_response_built_whole() -> None:
    """A MockTransport response made with ``content=`` is already read; send still reports it."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            503, content=b"x" * (EXCERPT_BYTES + 10), headers={"Retry-After": "7"}
        )

    async with DeliveryClient(transport=httpx.MockTransport(handler)) as client:
        result = await send(
            client, DeliveryRequest(url="http://example.test/", headers=(), body=b"")
        )
    assert result.status == 503 and result.retry_after == "7" and result.failure is None
    assert len(result.excerpt) == EXCERPT_BYTES
