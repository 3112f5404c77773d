"""One HTTP/1.1 client connection: h11's state machine over a trio stream.

Rules:
- A connection serves one request at a time; the pool (``engine.transport``) lends it out
  and takes it back. Nothing here decides about reuse except what h11 knows.
- Each write and each read has its own deadline (httpx's ``write`` and ``read`` timeouts
  are per operation, not per response).
- Failures become httpx exceptions here and nowhere else: a stalled write is
  ``WriteTimeout``, a stalled read ``ReadTimeout``, a broken stream ``WriteError`` /
  ``ReadError``, bytes that are not HTTP (or a server that closes before answering)
  ``RemoteProtocolError``, a request h11 refuses to frame ``LocalProtocolError``.
  Cancellation is never caught.
- After any failure or cancellation the connection is in an unknown state: its holder must
  :meth:`close` it. :meth:`start_next_exchange` is the only way back to a reusable state:
  both sides DONE (the response was read to its end, keep-alive on both sides) and
  nothing received beyond the response.
- :meth:`is_quiet` is checked before reusing an idle connection: an idle HTTP/1.1
  connection has nothing to say, so a readable socket means the server closed it (or sent
  junk) and the connection must not carry a request.
"""

from __future__ import annotations

import math
import select
from collections.abc import AsyncIterable

import h11
import httpx
import trio

READ_SIZE = 64 * 1024
_NO_ANSWER = "the server closed the connection without answering"


def _deadline(timeout_s: float | None) -> float:
    return math.inf if timeout_s is None else trio.current_time() + timeout_s


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__
    return str(cause or exc) or type(cause or exc).__name__


class Connection:
    """An open connection: the stream to speak over, the TCP socket beneath it, h11."""

    __slots__ = ("_h11", "_stream", "_tcp", "idle_since")

    def __init__(self, stream: trio.abc.Stream, tcp: trio.SocketStream) -> None:
        self._stream = stream
        self._tcp = tcp
        self._h11 = h11.Connection(our_role=h11.CLIENT)
        self.idle_since = 0.0  # trio time it was last put back in the pool

    async def send_request(
        self,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes | AsyncIterable[bytes],
        timeout_s: float | None,
    ) -> None:
        """Write the whole request. A bytes body goes out with the head in one write."""
        conn = self._h11
        try:
            head = conn.send(h11.Request(method=method, target=target, headers=headers))
            if isinstance(body, bytes):
                head += conn.send(h11.Data(data=body))
                await self._write(head + conn.send(h11.EndOfMessage()), timeout_s)
                return
            await self._write(head, timeout_s)
            async for chunk in body:
                await self._write(conn.send(h11.Data(data=chunk)), timeout_s)
            await self._write(conn.send(h11.EndOfMessage()), timeout_s)
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc

    async def receive_head(self, timeout_s: float | None) -> h11.Response:
        """The final response head (1xx interim responses are skipped)."""
        while True:
            event = self._next_buffered_event()
            if event is None:
                if not await self._read(timeout_s) and not self._h11.trailing_data[0]:
                    raise httpx.RemoteProtocolError(_NO_ANSWER)
            elif isinstance(event, h11.Response):
                return event
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError(_NO_ANSWER)
            elif not isinstance(event, h11.InformationalResponse):
                raise httpx.RemoteProtocolError(f"unexpected {event!r} before the response")

    async def receive_body(self, timeout_s: float | None) -> bytes | None:
        """The next part of the response body, or None at its end."""
        event = await self._next_event(timeout_s)
        if isinstance(event, h11.Data):
            return bytes(event.data)
        if isinstance(event, h11.EndOfMessage):
            return None
        raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} in the response body")

    def body_ends_in_buffer(self) -> bool:
        """Skip the body bytes already received; True if the response ends within them.

        No I/O: used when the caller stops reading, to keep the connection if it costs
        nothing (e.g. a body of exactly the excerpt size)."""
        try:
            while True:
                event = self._h11.next_event()
                if not isinstance(event, h11.Data):
                    return isinstance(event, h11.EndOfMessage)
        except h11.RemoteProtocolError:
            return False

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

    async def _next_event(self, timeout_s: float | None) -> h11.Event:
        while (event := self._next_buffered_event()) is None:
            await self._read(timeout_s)
        return event

    def _next_buffered_event(self) -> h11.Event | None:
        """The next event in what was received already; None when h11 needs more."""
        try:
            event = self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc
        if isinstance(event, h11.Event):
            return event
        if event is h11.NEED_DATA:
            return None
        raise httpx.RemoteProtocolError("the server sent more than one response")  # PAUSED

    async def _read(self, timeout_s: float | None) -> bool:
        """Feed h11 what arrives next; False at end of file."""
        with trio.CancelScope(deadline=_deadline(timeout_s)):
            try:
                data = await self._stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpx.ReadError(f"reading the response failed: {_describe(exc)}") from exc
            # b"" is end of file; h11 judges whether it came early.
            self._h11.receive_data(data if isinstance(data, bytes) else bytes(data))
            return bool(data)
        raise httpx.ReadTimeout(f"no response data for {timeout_s:g} s")

    async def _write(self, data: bytes, timeout_s: float | None) -> None:
        with trio.CancelScope(deadline=_deadline(timeout_s)):
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpx.WriteError(f"sending the request failed: {_describe(exc)}") from exc
            return
        raise httpx.WriteTimeout(f"the request could not be sent within {timeout_s:g} s")
