"""How long a connection lives (``appliance.api.serving``, rules 5 to 7), over real
loopback sockets in this process: a quart-trio app, as the appliance's (it cancels a
response's task as the response ends), served with small timeouts. A stream outlives
the read timeout and ends with its last chunk; a connection between requests closes
after the keep-alive timeout, however slowly its next request head trickles in; a body
that stops coming is cut by the read timeout (HTTP/1.1 and HTTP/2 alike); every accepted
socket drops a peer that vanishes."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import pytest
import trio
from quart import Response, request
from quart_trio import QuartTrio

from appliance.api import serving
from appliance.live.hub import HEARTBEAT_S
from tests.api.test_serving import HEAD, connect, read_until, serving_on_loopback

TIMEOUT = 1.0  # the config's read and keep-alive timeouts, in seconds
BEAT = 0.25  # the stream's heartbeat
LAST_CHUNK = b"0\r\n\r\n"


def quart_app(stopping: trio.Event) -> QuartTrio:
    """``/stream`` sends a heartbeat every ``BEAT`` until ``stopping`` (as the appliance's
    event hub closes at shutdown), then ends; ``/echo`` answers its body, or ``echo``."""
    app = QuartTrio(__name__)

    @app.route("/echo", methods=["GET", "POST"])
    async def echo() -> bytes:
        return await request.get_data() or b"echo"

    @app.get("/stream")
    async def stream() -> Response:
        async def beats() -> AsyncIterator[bytes]:
            yield b"retry: 1000\n\n"
            while not stopping.is_set():
                with trio.move_on_after(BEAT):
                    await stopping.wait()
                yield b": heartbeat\n\n"

        response = Response(beats(), mimetype="text/event-stream")
        response.timeout = None
        return response

    return app


async def closed_by_server(client: trio.SocketStream, *, within: float = 10) -> bool:
    """Read until the server closes (an end of file or a reset), for at most ``within``."""
    with trio.move_on_after(within):
        try:
            while await client.receive_some():
                pass
        except trio.BrokenResourceError:
            pass
        return True
    return False


async def test_a_stream_outlives_the_read_timeout_and_ends_with_its_last_chunk() -> None:
    stopping = trio.Event()
    timeouts = {"read_timeout": TIMEOUT, "keep_alive_timeout": TIMEOUT}
    async with serving_on_loopback(quart_app(stopping), **timeouts) as port:
        client = await connect(port)
        await client.send_all(b"GET /stream HTTP/1.1\r\nHost: steeple\r\n\r\n")
        data = await read_until(client, 1, b"retry")
        assert data.startswith(HEAD + b" 200")
        cut = False
        with trio.move_on_after(3 * TIMEOUT):  # the client keeps reading, sending nothing
            while chunk := await client.receive_some():
                data += chunk
            cut = True
        assert not cut, f"the stream was cut: {data!r}"
        assert data.count(b"heartbeat") >= 2, data
        assert not data.endswith(LAST_CHUNK), "the stream ended before it was told to"
        stopping.set()
        data += await read_until(client, 1, LAST_CHUNK)
        assert data.endswith(LAST_CHUNK), f"the stream ended without its last chunk: {data!r}"
        await client.aclose()


async def test_a_connection_between_requests_closes_after_the_keep_alive_timeout() -> None:
    # read_timeout is out of reach: only the keep-alive timer can close the connection.
    timeouts = {"read_timeout": 60, "keep_alive_timeout": TIMEOUT}
    async with serving_on_loopback(quart_app(trio.Event()), **timeouts) as port:
        client = await connect(port)
        for _ in range(2):  # the connection is kept alive between responses
            await client.send_all(b"GET /echo HTTP/1.1\r\nHost: steeple\r\n\r\n")
            assert (await read_until(client, 1, b"echo")).startswith(HEAD + b" 200")
        assert await closed_by_server(client), "an idle connection was kept open"
        await client.aclose()


@pytest.mark.parametrize("answered", [0, 1], ids=["first request", "after a response"])
async def test_a_request_head_that_never_completes_is_closed(answered: int) -> None:
    timeouts = {"read_timeout": TIMEOUT, "keep_alive_timeout": TIMEOUT}
    async with serving_on_loopback(quart_app(trio.Event()), **timeouts) as port:
        client = await connect(port)
        for _ in range(answered):
            await client.send_all(b"GET /echo HTTP/1.1\r\nHost: steeple\r\n\r\n")
            assert (await read_until(client, 1, b"echo")).startswith(HEAD + b" 200")
        await client.send_all(b"GET /echo HTTP/1.1\r\nHost: steeple\r\nX-Slow: ")

        async def trickle() -> None:  # a byte well within every read timeout
            try:
                while True:
                    await client.send_all(b"x")
                    await trio.sleep(TIMEOUT / 10)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trickle)
            assert await closed_by_server(client), "a request head trickling in was kept"
            nursery.cancel_scope.cancel()
        await client.aclose()


async def test_a_request_body_that_stops_coming_is_closed_after_the_read_timeout() -> None:
    timeouts = {"read_timeout": TIMEOUT, "keep_alive_timeout": 60}
    async with serving_on_loopback(quart_app(trio.Event()), **timeouts) as port:
        client = await connect(port)
        head = b"POST /echo HTTP/1.1\r\nHost: steeple\r\nContent-Length: 10\r\n\r\n"
        await client.send_all(head + b"x")  # nine bytes owed, never sent
        assert await closed_by_server(client), "a request body that stopped was waited for"
        await client.aclose()


def server_side(client: socket.socket) -> socket.socket:
    """This process's accepted socket at the other end of ``client`` (a duplicate)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            sock = socket.fromfd(int(fd), socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            if (sock.getsockname(), sock.getpeername()) == (
                client.getpeername(),
                client.getsockname(),
            ):
                return sock
        except OSError:
            pass
        sock.close()
    raise AssertionError("no accepted socket for the client")


async def test_every_accepted_socket_drops_a_peer_that_vanishes() -> None:
    async with serving_on_loopback(quart_app(trio.Event())) as port:
        client = await connect(port)
        await client.send_all(b"GET /echo HTTP/1.1\r\nHost: steeple\r\n\r\n")
        await read_until(client, 1, b"echo")  # the server has accepted and set it up
        with server_side(client.socket) as accepted:  # type: ignore[arg-type]
            assert accepted.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            tcp = socket.IPPROTO_TCP
            assert accepted.getsockopt(tcp, socket.TCP_KEEPIDLE) == serving.KEEPALIVE_IDLE_S
            assert accepted.getsockopt(tcp, socket.TCP_KEEPINTVL) == serving.KEEPALIVE_INTERVAL_S
            assert accepted.getsockopt(tcp, socket.TCP_KEEPCNT) == serving.KEEPALIVE_PROBES
            user_timeout = accepted.getsockopt(tcp, socket.TCP_USER_TIMEOUT)
            assert user_timeout == serving.DEAD_PEER_S * 1000
        await client.aclose()


def test_the_keepalive_probes_give_up_with_the_user_timeout_as_documented() -> None:
    probing = serving.KEEPALIVE_IDLE_S + serving.KEEPALIVE_INTERVAL_S * serving.KEEPALIVE_PROBES
    assert probing == serving.DEAD_PEER_S
    docs = " ".join((Path(__file__).parents[2] / "docs" / "operations.md").read_text().split())
    assert f"idle between requests closes after {serving.KEEP_ALIVE_TIMEOUT_S} s" in docs
    assert f"stalls for {serving.READ_TIMEOUT_S} s" in docs
    assert f"within about {HEARTBEAT_S + serving.DEAD_PEER_S} s" in docs
    assert f"a {serving.DEAD_PEER_S} s `TCP_USER_TIMEOUT`" in docs
    assert f"the {HEARTBEAT_S} s heartbeat" in docs


async def test_an_http2_stream_outlives_the_read_timeout_and_ends() -> None:
    """The same over HTTP/2 with prior knowledge (as ``curl --http2-prior-knowledge``)."""
    stopping = trio.Event()
    timeouts = {"read_timeout": TIMEOUT, "keep_alive_timeout": TIMEOUT}
    async with serving_on_loopback(quart_app(stopping), **timeouts) as port:
        client = await connect(port)
        h2conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        h2conn.initiate_connection()
        headers = [(":method", "GET"), (":scheme", "http"), (":authority", "steeple")]
        h2conn.send_headers(1, [*headers, (":path", "/stream")], end_stream=True)
        await client.send_all(h2conn.data_to_send())
        body = b""
        ended = closed = False  # the stream's end (its last frame); the connection's

        async def read() -> None:
            nonlocal body, ended, closed
            while not ended and (chunk := await client.receive_some()):
                for event in h2conn.receive_data(chunk):
                    if isinstance(event, h2.events.DataReceived):
                        body += event.data
                        h2conn.acknowledge_received_data(len(event.data), 1)
                    ended = ended or isinstance(event, h2.events.StreamEnded)
                await client.send_all(h2conn.data_to_send())  # acknowledgements only
            closed = not ended

        with trio.move_on_after(3 * TIMEOUT):
            await read()
        assert not (ended or closed), f"the stream was cut: {body!r}"
        assert body.count(b"heartbeat") >= 2, body
        stopping.set()
        with trio.fail_after(10):
            await read()
        assert ended, f"the stream was cut instead of ended: {body!r}"
        await client.aclose()


async def test_an_http2_request_body_that_stops_coming_is_closed() -> None:
    timeouts = {"read_timeout": TIMEOUT, "keep_alive_timeout": 60}
    async with serving_on_loopback(quart_app(trio.Event()), **timeouts) as port:
        client = await connect(port)
        h2conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        h2conn.initiate_connection()
        headers = [(":method", "POST"), (":scheme", "http"), (":authority", "steeple")]
        h2conn.send_headers(1, [*headers, (":path", "/echo")])  # its body never comes
        h2conn.send_data(1, b"x")
        await client.send_all(h2conn.data_to_send())
        assert await closed_by_server(client), "a request body that stopped was waited for"
        await client.aclose()
