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
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
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
    EXCERPT_BYTES,
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
    assert b"accept-encoding: identity" in lines
    assert b"x-test: yes" in lines
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
            await client.get("http://localhost:9/")
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

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        result = await send(
            client, DeliveryRequest(url="http://example.test/", headers=(), body=b"")
        )
    assert result.status == 503 and result.retry_after == "7" and result.failure is None
    assert len(result.excerpt) == EXCERPT_BYTES
