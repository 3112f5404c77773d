"""``appliance.api.serving``: hypercorn's HTTP/1.1 protocol, reading on while a response
is in progress, over real loopback sockets in this process (a small ASGI app stands in
for the endless event stream). The last tests pin the hypercorn internals the module
relies on: when one fails, hypercorn changed, and the module's rules need a new look."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import hypercorn.config
import hypercorn.protocol
import hypercorn.trio
import hypercorn.trio.run
import pytest
import trio
from hypercorn.protocol import h11 as hypercorn_h11
from hypercorn.trio import tcp_server

from appliance.api import serving

HEAD = b"HTTP/1.1"


def request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: steeple\r\n\r\n".encode()


@dataclass
class StreamApp:
    """``/stream`` answers one chunk, then waits for the client to leave (as the event
    stream does between heartbeats); ``/echo?x`` answers ``x``."""

    opened: int = 0
    left: int = 0
    changed: trio.Event = field(default_factory=trio.Event)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["path"] == "/stream":
            await self._stream(receive, send)
        else:
            body = scope["query_string"]
            length = str(len(body)).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-length", length)]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})

    async def _stream(self, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"retry: 1000\n\n", "more_body": True})
        self._count("opened")
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        finally:
            self._count("left")

    def _count(self, name: str) -> None:
        setattr(self, name, getattr(self, name) + 1)
        self.changed.set()
        self.changed = trio.Event()

    async def wait(self, *, opened: int = 0, left: int = 0) -> None:
        with trio.fail_after(10):
            while self.opened < opened or self.left < left:
                await self.changed.wait()

    @staticmethod
    async def _lifespan(receive: Any, send: Any) -> None:
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


@asynccontextmanager
async def serving_on_loopback(app: Any, **timeouts: float | None) -> AsyncIterator[int]:
    """``app`` served as the appliance serves, on a free loopback port; ``timeouts`` set
    the config's (``read_timeout``, ``keep_alive_timeout``)."""
    serving.install()
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 1
    config.accesslog = None
    for name, value in timeouts.items():
        setattr(config, name, value)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: hypercorn.trio.serve(
                app,  # type: ignore[arg-type]
                config,
                shutdown_trigger=stop.wait,
                task_status=task_status,
            )
        )
        yield int(binds[0].rsplit(":", 1)[1])
        stop.set()


async def connect(port: int) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", port)


async def read_until(stream: trio.SocketStream, count: int, marker: bytes = HEAD) -> bytes:
    """What the server sent, until ``marker`` appeared ``count`` times (or it closed)."""
    data = b""
    with trio.fail_after(10):
        while data.count(marker) < count:
            chunk = await stream.receive_some()
            if not chunk:
                break
            data += chunk
    return data


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def wait_for_fds(at_most: int) -> None:
    """Poll this process's descriptor count until it is down to ``at_most``."""
    with trio.fail_after(10):
        while open_fds() > at_most:  # noqa: ASYNC110 - the descriptor table sends no event
            await trio.sleep(0.02)


@pytest.mark.parametrize(
    "extra",
    [b"\r\n", request("/echo?next"), b"x"],
    ids=["blank line", "pipelined request", "one byte"],
)
async def test_a_client_that_sends_more_and_leaves_is_heard_and_its_socket_closed(
    extra: bytes,
) -> None:
    app = StreamApp()
    async with serving_on_loopback(app) as port:
        baseline = open_fds()
        for n in range(1, 11):
            client = await connect(port)
            await client.send_all(request("/stream") + extra)
            assert (await read_until(client, 1, b"retry")).startswith(HEAD + b" 200")
            await app.wait(opened=n)
            await client.aclose()
        await app.wait(left=10)  # each stream heard its client leave
        await wait_for_fds(baseline)  # and the server closed each socket


async def test_pipelined_requests_are_answered_in_order() -> None:
    async with serving_on_loopback(StreamApp()) as port:
        client = await connect(port)
        await client.send_all(b"".join(request(f"/echo?{n}") for n in ("one", "two", "three")))
        answers = await read_until(client, 1, b"three")
        assert answers.count(HEAD + b" 200") == 3
        assert answers.index(b"one") < answers.index(b"two") < answers.index(b"three")
        await client.send_all(request("/echo?four"))  # the connection is still usable
        assert (await read_until(client, 1, b"four")).startswith(HEAD + b" 200")
        await client.aclose()


async def test_more_than_the_bound_sent_ahead_closes_the_connection() -> None:
    app = StreamApp()
    async with serving_on_loopback(app) as port:
        client = await connect(port)
        await client.send_all(request("/stream"))
        await app.wait(opened=1)
        await client.send_all(b"x" * (serving.MAX_UNREAD + 1))
        await app.wait(left=1)
        assert (await read_until(client, 2, b"retry")).count(b"retry") == 1  # then the end
        await client.aclose()


async def test_a_stream_still_ends_when_the_server_shuts_down() -> None:
    app = StreamApp()
    async with serving_on_loopback(app) as port:
        client = await connect(port)
        await client.send_all(request("/stream") + b"\r\n")
        await app.wait(opened=1)
    assert app.left == 1  # hypercorn's graceful stop ended it
    await client.aclose()


def test_hypercorn_still_builds_the_protocol_by_its_module_name() -> None:
    """``install`` replaces ``hypercorn.protocol.H11Protocol``: ProtocolWrapper must look
    that name up for each connection."""
    wrapper = hypercorn.protocol.ProtocolWrapper.__init__.__code__
    assert "H11Protocol" in wrapper.co_names
    serving.install()
    assert hypercorn.protocol.H11Protocol is serving.H11Protocol  # type: ignore[attr-defined]


def test_hypercorn_still_waits_on_can_read_when_h11_pauses() -> None:
    """The cause the module works around (hypercorn 0.18, ``_handle_events``): a pause
    waits on ``can_read``. When this fails, see whether the wait is gone upstream."""
    names = hypercorn_h11.H11Protocol._handle_events.__code__.co_names
    assert {"PAUSED", "can_read", "wait", "clear"} <= set(names)
    recycle = hypercorn_h11.H11Protocol._maybe_recycle.__code__.co_names
    assert {"start_next_cycle", "can_read", "Updated"} <= set(recycle)


def test_hypercorn_still_builds_the_connection_by_its_module_name() -> None:
    """``install`` replaces ``hypercorn.trio.run.TCPServer``; ``Connection`` replaces its
    read loop, which must still be the only reader, bounded by ``read_timeout``."""
    assert "TCPServer" in hypercorn.trio.run.worker_serve.__code__.co_names
    serving.install()
    assert hypercorn.trio.run.TCPServer is serving.Connection  # type: ignore[attr-defined]
    run = tcp_server.TCPServer.run.__code__.co_names
    assert {"_read_data", "idle_task", "restart"} <= set(run)
    read = tcp_server.TCPServer._read_data.__code__.co_names
    assert {"read_timeout", "receive_some", "fail_after"} <= set(read)
