"""Real loopback servers for the delivery client's tests (no other network), and the
small helpers those tests share: a delivery request, a dictionary for DNS, a pool in view.

- :func:`receiver`: one request per connection, answered by a ``Reply`` of raw bytes.
- :func:`keep_alive_server`: many requests per connection, recording which connection
  each came on, answered by a ``Respond``.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import trio
import trio.testing

from appliance.core.addresses import AddressPolicy, IPAddress
from appliance.core.delivery import DeliveryRequest
from appliance.core.schedules import Method
from appliance.engine.delivery import DeliveryClient, send
from appliance.engine.delivery.connect import name_not_resolved

OPEN = AddressPolicy()
LOOPBACK_ALLOWED = AddressPolicy.parse(["127.0.0.0/8"])
BODY = b'{"hello": "receiver"}'

Reply = Callable[[trio.SocketStream], Awaitable[None]]
Respond = Callable[[int], Awaitable[tuple[bytes, bool]]]
"""Request number (from 1, over all connections) -> (raw reply, keep the connection open)."""


def delivery(url: str, body: bytes = BODY, method: Method = Method.POST) -> DeliveryRequest:
    typed = (("Content-Type", "application/json"),) if method.carries_body else ()
    return DeliveryRequest(
        url=url,
        headers=(*typed, ("X-Test", "yes")),
        body=body if method.carries_body else b"",
        method=method,
    )


def fake_dns(table: dict[str, list[str]]) -> Callable[[str], Awaitable[list[IPAddress]]]:
    async def resolve(host: str) -> list[IPAddress]:
        if host not in table:
            raise name_not_resolved(f"could not resolve host {host!r}")
        return [ipaddress.ip_address(a) for a in table[host]]

    return resolve


async def read_request(stream: trio.abc.Stream) -> bytes:
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


def response(body: bytes = b"ok", *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + body


def canned(status: str, headers: Iterable[tuple[str, str]] = (), body: bytes = b"") -> Reply:
    async def reply(stream: trio.SocketStream) -> None:
        pairs = [*headers, ("Connection", "close")]
        await stream.send_all(response(body, *(f"{k}: {v}" for k, v in pairs), status=status))

    return reply


@dataclass
class Receiver:
    """A loopback HTTP/1.1 server that records each request head and body."""

    port: int = 0
    requests: list[bytes] = field(default_factory=list)

    def url(self, host: str = "127.0.0.1", path: str = "/hook") -> str:
        return f"http://{host}:{self.port}{path}"


@contextlib.asynccontextmanager
async def serving(handle: Callable[[trio.SocketStream], Awaitable[None]]) -> AsyncIterator[int]:
    """Serve ``handle`` on a free port of 127.0.0.1 until the block ends; yields the port."""
    async with trio.open_nursery() as nursery:
        listeners: list[trio.SocketListener] = await nursery.start(
            functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
        )
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def receiver(reply: Reply, *, read_first: bool = True) -> AsyncIterator[Receiver]:
    """Serve on 127.0.0.1; ``read_first=False`` replies without waiting for a request."""
    rx = Receiver()

    async def handle(stream: trio.SocketStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            if read_first:
                rx.requests.append(await read_request(stream))
            await reply(stream)

    async with serving(handle) as port:
        rx.port = port
        yield rx


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

    async with serving(handle) as port:
        server.port = port
        yield server


async def delivered(client: DeliveryClient, url: str) -> int | None:
    """Send one delivery that must get an answer; its status."""
    result = await send(client, delivery(url))
    assert result.error is None, result.error
    return result.status
