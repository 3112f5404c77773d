"""One HTTP/1.1 client connection: h11's state machine over a trio stream.

Rules:
- A connection serves one request at a time; the pool lends it out and takes it back.
  Nothing here decides about reuse except what h11 knows.
- No timeouts of its own: the attempt's cancel scope bounds every write and read, so the
  schedule's ``timeout_seconds`` is the one limit on how long a receiver may take.
- Failures are :class:`DeliveryFailed`, raised here: a broken stream is ``connect``
  ("sending the request failed: …", "reading the response failed: …"); bytes that are not
  HTTP, a server that closes before answering, or a request h11 refuses to frame are
  ``protocol``. Cancellation is never caught.
- After any failure or cancellation the connection is in an unknown state: its holder must
  :meth:`close` it. :meth:`start_next_exchange` is the only way back to a reusable state:
  both sides DONE (the response was read to its end, keep-alive on both sides) and
  nothing received beyond the response.
- :meth:`is_quiet` is checked before reusing an idle connection: an idle HTTP/1.1
  connection has nothing to say, so a readable socket means the server closed it (or sent
  junk) and the connection must not carry a request.
- :meth:`read_excerpt` is the one place a response body is cut (at the excerpt size).
"""

from __future__ import annotations

import select

import h11
import trio

from appliance.core.retry import TransportFailure
from appliance.engine.delivery.exchange import DeliveryFailed

READ_SIZE = 64 * 1024
_NO_ANSWER = "the server closed the connection without answering"


def _protocol(message: str) -> DeliveryFailed:
    return DeliveryFailed(TransportFailure.PROTOCOL, message)


def _broken(what: str, exc: BaseException) -> DeliveryFailed:
    cause = exc.__cause__ or exc
    return DeliveryFailed(TransportFailure.CONNECT, f"{what}: {str(cause) or type(cause).__name__}")


class Connection:
    """An open connection: the stream to speak over, the TCP socket beneath it, h11."""

    __slots__ = ("_h11", "_stream", "_tcp", "idle_since")

    def __init__(self, stream: trio.abc.Stream, tcp: trio.SocketStream) -> None:
        self._stream = stream
        self._tcp = tcp
        self._h11 = h11.Connection(our_role=h11.CLIENT)
        self.idle_since = 0.0  # trio time it was last put back in the pool

    async def send_request(
        self, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        """Write the whole POST, head and body in one write."""
        conn = self._h11
        try:
            data = conn.send(h11.Request(method="POST", target=target, headers=headers))
            data += conn.send(h11.Data(data=body))
            data += conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:
            raise _protocol(f"the request cannot be framed: {exc}") from exc
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _broken("sending the request failed", exc) from exc

    async def receive_head(self) -> h11.Response:
        """The final response head (1xx interim responses are skipped)."""
        while True:
            event = self._next_buffered_event()
            if event is None:
                if not await self._read() and not self._h11.trailing_data[0]:
                    raise _protocol(_NO_ANSWER)
            elif isinstance(event, h11.Response):
                return event
            elif isinstance(event, h11.ConnectionClosed):
                raise _protocol(_NO_ANSWER)
            elif not isinstance(event, h11.InformationalResponse):
                raise _protocol(f"unexpected {event!r} before the response")

    async def read_excerpt(self, limit: int) -> tuple[bytes, str | None, bool]:
        """The first ``limit`` bytes of the body, the error that cut it short (if any), and
        whether the response was read to its end (so the connection may be reused)."""
        received = bytearray()
        try:
            while (chunk := await self._receive_body()) is not None:
                received += chunk
                if len(received) >= limit:
                    return bytes(received[:limit]), None, self._body_ends_in_buffer()
        except DeliveryFailed as exc:
            return bytes(received), f"reading the response body failed: {exc.message}", False
        return bytes(received), None, True

    def start_next_exchange(self) -> bool:
        """Ready the connection for another request if h11 says it can carry one."""
        conn = self._h11
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return False  # unfinished, Connection: close, HTTP/1.0, or failed
        extra, closed = conn.trailing_data
        if extra or closed:
            return False  # bytes beyond the response, or EOF already seen
        conn.start_next_cycle()
        return True

    def is_quiet(self) -> bool:
        """Idle, and the server has said nothing since (no EOF, no stray bytes)."""
        conn = self._h11
        if conn.our_state is not h11.IDLE or conn.their_state is not h11.IDLE:
            return False
        fd = self._tcp.socket.fileno()
        if fd < 0:
            return False
        probe = select.poll()
        probe.register(fd, select.POLLIN)
        return not probe.poll(0)  # any event (data, EOF, hang-up, error) disqualifies

    def close(self) -> None:
        """Close at once, without a TLS close_notify (HTTP frames its own messages).

        Synchronous on purpose: it runs in cleanup paths that may already be cancelled."""
        self._tcp.socket.close()

    async def _receive_body(self) -> bytes | None:
        """The next part of the response body, or None at its end."""
        while (event := self._next_buffered_event()) is None:
            await self._read()
        if isinstance(event, h11.Data):
            return bytes(event.data)
        if isinstance(event, h11.EndOfMessage):
            return None
        raise _protocol(f"unexpected {type(event).__name__} in the response body")

    def _body_ends_in_buffer(self) -> bool:
        """Skip the body bytes already received; True if the response ends within them.
        No I/O: keeps the connection when it costs nothing (a body of exactly the limit)."""
        try:
            while True:
                event = self._h11.next_event()
                if not isinstance(event, h11.Data):
                    return isinstance(event, h11.EndOfMessage)
        except h11.RemoteProtocolError:
            return False

    def _next_buffered_event(self) -> h11.Event | None:
        """The next event in what was received already; None when h11 needs more."""
        try:
            event = self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            raise _protocol(str(exc)) from exc
        if isinstance(event, h11.Event):
            return event
        if event is h11.NEED_DATA:
            return None
        raise _protocol("the server sent more than one response")  # PAUSED

    async def _read(self) -> bool:
        """Feed h11 what arrives next; False at end of file."""
        try:
            data = await self._stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _broken("reading the response failed", exc) from exc
        # b"" is end of file; h11 judges whether it came early.
        self._h11.receive_data(data if isinstance(data, bytes) else bytes(data))
        return bool(data)
