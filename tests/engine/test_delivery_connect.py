"""The address policy at connect time, against real loopback servers (ADR 0032, its
outbound-safety section): blocked addresses are refused before any connection (the server
sees nothing), DNS rebinding is caught on the address actually connected to, and TLS
verifies the URL's host over that checked address."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from appliance.core.addresses import AddressPolicy, IPAddress
from appliance.core.retry import TransportFailure
from appliance.engine.delivery import DeliveryClient, DeliveryFailed, send
from appliance.engine.delivery.connect import Connector, refusal
from tests.engine.loopback import (
    BODY,
    LOOPBACK_ALLOWED,
    OPEN,
    KeepAliveServer,
    canned,
    delivery,
    fake_dns,
    read_request,
    receiver,
    response,
)

SSL = ssl.create_default_context()  # for connectors that never reach TLS


async def test_loopback_is_blocked_by_default_and_the_server_sees_nothing() -> None:
    async with receiver(canned("200 OK")) as rx, DeliveryClient(OPEN) as client:
        result = await send(client, delivery(rx.url()))
    assert result.failure is TransportFailure.BLOCKED
    assert result.status is None
    assert result.error is not None and "127.0.0.1 is a loopback address" in result.error
    assert rx.requests == []


async def test_allow_listed_loopback_delivery_succeeds() -> None:
    async with (
        receiver(canned("200 OK", body=b"thanks")) as rx,
        DeliveryClient(LOOPBACK_ALLOWED) as client,
    ):
        result = await send(client, delivery(rx.url()))
    assert (result.status, result.failure, result.error, result.excerpt) == (
        200, None, None, "thanks",
    )  # fmt: skip
    [raw] = rx.requests
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /hook HTTP/1.1")
    assert body == BODY
    assert b"x-test: yes" in head.lower().split(b"\r\n")  # the request's headers, exactly
    assert result.latency_ms >= 0


async def test_rebinding_name_is_checked_on_the_address_actually_connected_to(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The name passes the static check; only connect-time resolution shows it is loopback.
    # The tenant reads the write-time check's generic words; the operator's log, the why.
    rebind = fake_dns({"rebind.example": ["127.0.0.1"]})
    async with receiver(canned("204 No Content")) as rx:
        with caplog.at_level(logging.WARNING, logger="appliance.engine.delivery.connect"):
            async with DeliveryClient(OPEN, resolve=rebind) as client:
                blocked = await send(client, delivery(rx.url("rebind.example")))
        assert blocked.failure is TransportFailure.BLOCKED
        assert blocked.error == refusal("rebind.example")
        assert "127.0.0.1" not in blocked.error and "loopback" not in blocked.error
        assert "rebind.example resolves to 127.0.0.1, which is a loopback address" in caplog.text
        assert rx.requests == []

        async with DeliveryClient(LOOPBACK_ALLOWED, resolve=rebind) as client:
            allowed = await send(client, delivery(rx.url("rebind.example")))
    assert allowed.status == 204
    # Connected to the checked address, yet the request still names the host.
    assert f"host: rebind.example:{rx.port}".encode() in rx.requests[0].lower().split(b"\r\n")


async def test_an_internationalised_name_is_resolved_and_sent_in_its_ascii_form() -> None:
    dns = fake_dns({"xn--bcher-kva.example": ["127.0.0.1"]})
    async with (
        receiver(canned("200 OK")) as rx,
        DeliveryClient(LOOPBACK_ALLOWED, resolve=dns) as client,
    ):
        result = await send(client, delivery(rx.url("bücher.example")))
    assert (result.status, result.error) == (200, None)
    assert f"Host: xn--bcher-kva.example:{rx.port}".encode() in rx.requests[0].split(b"\r\n")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://localhost:9/", "names the appliance's own machine"),
        ("http://metadata.google.internal/", "is a cloud metadata service"),
        # Fullwidth letters normalise to the metadata name: refused before any lookup.
        ("http://ｍｅｔａｄａｔａ.google.internal/", "is a cloud metadata service"),
        ("http://[::169.254.169.254]/", "is a cloud metadata address"),
        ("http://0.0.0.0:9/", "it reaches the appliance's own machine"),
    ],
)
async def test_the_client_refuses_forbidden_targets_whoever_calls_it(
    url: str, message: str
) -> None:
    looked_up: list[str] = []

    async def resolve(host: str) -> list[IPAddress]:
        looked_up.append(host)
        return [ipaddress.ip_address("8.8.8.8")]

    everything_allowed = AddressPolicy.parse(["127.0.0.0/8", "10.0.0.0/8"])
    async with DeliveryClient(everything_allowed, resolve=resolve) as client:
        with pytest.raises(DeliveryFailed, match=message) as caught:
            await client.exchange(delivery(url))
    assert caught.value.failure is TransportFailure.BLOCKED
    assert looked_up == []


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


def connector(policy: AddressPolicy, tcp: RecordingTCP, **dns: list[str]) -> Connector:
    table = {name.replace("_", "."): addresses for name, addresses in dns.items()}
    return Connector(policy, resolve=fake_dns(table), connect=tcp, ssl_context=SSL)


async def test_one_blocked_address_blocks_the_host_before_any_connection() -> None:
    tcp = RecordingTCP(answer=1)
    guarded = connector(OPEN, tcp, mixed_example=["8.8.8.8", "10.0.0.7"])
    with pytest.raises(DeliveryFailed) as caught:
        await guarded.connect_tcp("mixed.example", 443)
    assert caught.value.failure is TransportFailure.BLOCKED
    assert caught.value.message == refusal("mixed.example")
    assert tcp.connected == []


async def test_a_failed_connection_names_the_host_and_port_not_the_address() -> None:
    tcp = RecordingTCP(answer=0)
    guarded = connector(OPEN, tcp, public_example=["8.8.8.8"])
    with pytest.raises(DeliveryFailed) as caught:
        await guarded.connect_tcp("public.example", 443)
    assert (
        caught.value.message == "could not connect to public.example port 443: Connection refused"
    )


async def test_connector_connects_to_the_checked_address_not_the_name() -> None:
    tcp = RecordingTCP(answer=1)
    guarded = connector(OPEN, tcp, public_example=["2606:4700::1", "8.8.8.8"])
    stream = await guarded.connect_tcp("public.example", 443)
    await stream.aclose()
    assert tcp.connected == ["2606:4700::1"]


async def test_connector_tries_the_next_checked_address_when_one_refuses() -> None:
    tcp = RecordingTCP(answer=0)
    guarded = connector(OPEN, tcp, public_example=["2606:4700::1", "8.8.8.8"])
    with pytest.raises(DeliveryFailed, match="Connection refused") as caught:
        await guarded.connect_tcp("public.example", 443)
    assert caught.value.failure is TransportFailure.CONNECT
    assert tcp.connected == ["2606:4700::1", "8.8.8.8"]


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("::ffff:127.0.0.1", "loopback address: it embeds"),
        ("169.254.169.254", "cloud metadata address"),
        ("::169.254.169.254", "cloud metadata address"),  # IPv4-compatible
        ("0.0.0.0", "it reaches the appliance's own machine"),
        ("::", "it reaches the appliance's own machine"),
    ],
)
async def test_literals_never_allowed_are_blocked_at_connect(host: str, message: str) -> None:
    tcp = RecordingTCP(answer=1)
    everything = AddressPolicy(
        allow=(ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    )
    policy = OPEN if "embeds" in message else everything
    with pytest.raises(DeliveryFailed, match=message):
        await connector(policy, tcp).connect_tcp(host, 80)
    assert tcp.connected == []


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
            while await read_request(stream):
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
        DeliveryClient(LOOPBACK_ALLOWED, resolve=dns, ssl_context=trusted) as client,
    ):
        for _ in range(2):
            result = await send(client, delivery(f"https://hook.example:{server.port}/"))
            assert (result.status, result.excerpt) == (200, "secure")
        assert server.on_connection == [1, 1]  # kept alive over TLS too
        wrong = await send(client, delivery(f"https://other.example:{server.port}/"))
        assert wrong.failure is TransportFailure.TLS
        assert wrong.error is not None and "other.example" in wrong.error
        assert client.pool.open_connections() == 1


async def test_tls_handshake_failure_maps_to_tls() -> None:
    # Plain HTTP where TLS is expected: the handshake fails.
    async with receiver(canned("400 Bad Request"), read_first=False) as rx:
        async with DeliveryClient(LOOPBACK_ALLOWED) as client:
            result = await send(client, delivery(f"https://127.0.0.1:{rx.port}/"))
            assert client.pool.open_connections() == 0
    assert result.failure is TransportFailure.TLS
    assert result.error is not None and "TLS handshake with 127.0.0.1 failed" in result.error
