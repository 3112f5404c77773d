"""HTTP/1.1 connections that keep reading while a response is in progress, and that
live as long as their client does.

hypercorn 0.18's ``H11Protocol`` waits on ``can_read`` when h11 pauses (bytes after a
complete request, its response still going out). The wait blocks the connection's only
reader and nothing sets the event once the peer is gone: a client that sent a byte too
many on an endless stream (``/v1/events/stream``, ``/events/stream``) held its socket.
Its ``TCPServer`` bounds every read by ``read_timeout``, a streaming response's too, and
restarts the keep-alive timer from the response's task, which quart-trio has cancelled
by then.

Rules this module guards:

1. No task waits for ``can_read``: a pause ends the parsing pass and the reader reads on,
   so an end of file or a reset ends the response (``http.disconnect``) and the socket.
2. What h11 holds unparsed is bounded (``MAX_UNREAD``); past it the connection closes.
3. Pipelined requests are answered in order: parsed once the connection is recycled.
4. One parsing pass at a time per connection; a pass sees new bytes in its own loop.
5. Between requests the keep-alive timer runs (``keep_alive_timeout``): restarted by a
   task of the connection's own once a response ends, so an idle connection, or one whose
   next request head never completes, closes.
6. ``read_timeout`` bounds a read only while the client owes bytes (a request head or
   body; on HTTP/2, h2c, as long as a stream's request is incomplete or none is open);
   a response in progress, however long, is never cut by it.
7. Every accepted TCP socket drops a peer gone without FIN or RST (``DEAD_PEER_S``).

``install`` swaps the classes in for the process; ``tests/api/test_serving.py`` pins the
hypercorn internals relied on.
"""

from __future__ import annotations

import contextlib
import socket
from math import inf
from typing import Any, Final

import h2.stream
import h11
import hypercorn.protocol
import hypercorn.trio.run
import trio
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol import h11 as hypercorn_h11
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.events import StreamClosed
from hypercorn.protocol.h2 import H2Protocol
from hypercorn.protocol.h11 import H2CProtocolRequiredError, H2ProtocolAssumedError
from hypercorn.trio import tcp_server

__all__ = [
    "DEAD_PEER_S",
    "KEEP_ALIVE_TIMEOUT_S",
    "MAX_UNREAD",
    "READ_TIMEOUT_S",
    "Connection",
    "H11Protocol",
    "install",
]

MAX_UNREAD: Final = 65_536  # bytes a client may send ahead of the response it awaits
KEEP_ALIVE_TIMEOUT_S: Final = 5  # a connection between requests closes after this long
READ_TIMEOUT_S: Final = 30  # the longest wait for the next byte of a request a client owes

# Rule 7. Data a peer leaves unacknowledged for DEAD_PEER_S aborts the connection
# (TCP_USER_TIMEOUT): a stream writes a heartbeat every event_hub.HEARTBEAT_S, so a
# vanished peer fails a write, and the stream ends, within HEARTBEAT_S + DEAD_PEER_S. A
# connection with nothing in flight is probed after KEEPALIVE_IDLE_S of silence, every
# KEEPALIVE_INTERVAL_S, and dropped after KEEPALIVE_PROBES unanswered:
# KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_PROBES == DEAD_PEER_S, so both
# mechanisms give up at the same time. A live peer acknowledges within a round trip.
DEAD_PEER_S: Final = 30
KEEPALIVE_IDLE_S: Final = 15
KEEPALIVE_INTERVAL_S: Final = 5
KEEPALIVE_PROBES: Final = 3


class _Paused(Exception):
    """h11 will parse no more until the response in progress ends (rule 1)."""


class _NeverWait:
    """Stands in for ``H11Protocol.can_read``: a pause raises instead of waiting."""

    async def clear(self) -> None:
        pass

    async def set(self) -> None:
        pass

    async def wait(self) -> None:
        raise _Paused

    def is_set(self) -> bool:
        return True


class H11Protocol(hypercorn_h11.H11Protocol):
    """hypercorn's HTTP/1.1 protocol, with the reader never blocked by a pause."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.can_read = _NeverWait()
        self._parsing = False

    @property
    def owed_by_client(self) -> bool:
        """Rule 6: a request head or body is awaited (not a response being sent)."""
        return self.connection.their_state in {h11.IDLE, h11.SEND_BODY}

    async def handle(self, event: Event) -> None:
        if isinstance(event, RawData):
            self.connection.receive_data(event.data)
            await self._parse()
        else:
            await super().handle(event)

    async def stream_send(self, event: StreamEvent) -> None:
        try:
            await super().stream_send(event)
        finally:
            # Not in this task: it is the response's, which quart-trio cancels as it ends.
            if isinstance(event, StreamClosed) and self._recycled():
                self.task_group.spawn(self._next_request)

    async def _next_request(self) -> None:
        """Rules 5 and 3: the keep-alive timer, then the requests pipelined behind the one
        just answered (a request parsed stops the timer again)."""
        if self._recycled() and self.connection.their_state is h11.IDLE:
            await self.send(Updated(idle=True))  # no request parsed since the recycling
        if not self._held():
            return
        try:
            await self._parse()
        except (H2CProtocolRequiredError, H2ProtocolAssumedError):
            await self.send(Closed())  # an upgrade pipelined behind a request: refused

    async def _parse(self) -> None:
        if self._parsing:
            return  # rule 4: that pass's loop calls next_event again after each await
        self._parsing = True
        try:
            await self._handle_events()
        except _Paused:
            if self._held() > MAX_UNREAD:
                await self.send(Closed())
        finally:
            self._parsing = False

    def _recycled(self) -> bool:
        return self.stream is None and self.connection.our_state is h11.IDLE

    def _held(self) -> int:
        data, _closed = self.connection.trailing_data
        return len(data)


class Connection(tcp_server.TCPServer):
    """hypercorn's connection, reading under ``read_timeout`` only while the client owes
    a request (rule 6), on a socket that drops a vanished peer (rule 7)."""

    async def run(self) -> None:
        sock = _socket_of(self.stream)
        if sock is not None:
            drop_vanished_peers(sock)
        await super().run()

    async def _read_data(self) -> None:
        # hypercorn's loop, the timeout chosen per read.
        while True:
            try:
                with trio.fail_after(self._read_timeout()):
                    data = await self.stream.receive_some(tcp_server.MAX_RECV)
            except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                break
            else:
                await self.protocol.handle(RawData(bytes(data)))
                if data == b"":
                    break
        await self.protocol.handle(Closed())

    def _read_timeout(self) -> float:
        protocol = self.protocol.protocol
        if isinstance(protocol, H2Protocol):
            owed = _h2_owed_by_client(protocol)
        else:  # hypercorn's own H11Protocol only where install() was not called
            owed = not isinstance(protocol, H11Protocol) or protocol.owed_by_client
        return (self.config.read_timeout or inf) if owed else inf


def _h2_owed_by_client(protocol: H2Protocol) -> bool:
    """Rule 6 on HTTP/2: no request yet, or one whose client has not finished sending."""
    if not protocol.streams:
        return True
    receiving = {h2.stream.StreamState.OPEN, h2.stream.StreamState.HALF_CLOSED_LOCAL}
    streams = protocol.connection.streams.values()
    return any(stream.state_machine.state in receiving for stream in streams)


def _socket_of(stream: object) -> trio.socket.SocketType | None:
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    return stream.socket if isinstance(stream, trio.SocketStream) else None


def drop_vanished_peers(sock: trio.socket.SocketType) -> None:
    """Rule 7 on one accepted TCP socket; an option the platform lacks is skipped."""
    if sock.family not in {socket.AF_INET, socket.AF_INET6}:
        return  # a Unix socket has no peer to lose
    options = [
        (socket.SOL_SOCKET, "SO_KEEPALIVE", 1),
        (socket.IPPROTO_TCP, "TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
        (socket.IPPROTO_TCP, "TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
        (socket.IPPROTO_TCP, "TCP_KEEPCNT", KEEPALIVE_PROBES),
        (socket.IPPROTO_TCP, "TCP_USER_TIMEOUT", DEAD_PEER_S * 1000),  # milliseconds
    ]
    for level, name, value in options:
        option = getattr(socket, name, None)
        if option is None:
            continue
        with contextlib.suppress(OSError):  # the peer may be gone: the first read says so
            sock.setsockopt(level, option, value)


def install() -> None:
    """Serve every connection of this process with :class:`Connection`, and every
    HTTP/1.1 one with :class:`H11Protocol`."""
    # ProtocolWrapper (hypercorn/protocol/__init__.py) builds this name for every connection.
    current = hypercorn.protocol.H11Protocol  # type: ignore[attr-defined]
    if current is not H11Protocol and current is not hypercorn_h11.H11Protocol:
        raise RuntimeError(f"hypercorn's H11Protocol is already replaced, by {current!r}")
    hypercorn.protocol.H11Protocol = H11Protocol  # type: ignore[attr-defined]
    # worker_serve (hypercorn/trio/run.py) builds this name for every accepted socket.
    server = hypercorn.trio.run.TCPServer  # type: ignore[attr-defined]
    if server is not Connection and server is not tcp_server.TCPServer:
        raise RuntimeError(f"hypercorn's TCPServer is already replaced, by {server!r}")
    hypercorn.trio.run.TCPServer = Connection  # type: ignore[attr-defined]
