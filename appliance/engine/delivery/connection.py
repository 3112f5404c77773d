"""One HTTP/1.1 client connection: a framed request out, a :class:`ResponseReader` in.

Rules:
- A connection serves one request at a time; the pool lends it out and takes it back.
  Nothing here decides about reuse except what the response reader knows.
- No timeouts of its own: the attempt's cancel scope bounds every write and read, so the
  schedule's ``timeout_seconds`` is the one limit on how long a receiver may take.
- Failures are :class:`DeliveryFailed`, raised here: a broken stream is ``connect``
  ("sending the request failed: …", "reading the response failed: …"); bytes that are not
  HTTP, a server that closes before answering, or a request that cannot be framed
  (request.py) are ``protocol``. Cancellation is never caught.
- After any failure or cancellation the connection is in an unknown state: its holder must
  :meth:`close` it. :meth:`start_next_exchange` is the only way back to a reusable state:
  the response read to its end, keep-alive, nothing received beyond it (response.py).
- :meth:`is_quiet` is checked before reusing an idle connection: an idle HTTP/1.1
  connection has nothing to say, so a readable socket means the server closed it (or sent
  junk) and the connection must not carry a request.
- :meth:`read_excerpt` is the one place a response body is cut (at the excerpt size).
- Over plain TCP the socket is written and read directly (:meth:`_write`, :meth:`_receive`):
  a cancellation point before the write, and each read waits for the socket to be readable
  first (a schedule and cancellation point), as trio's stream would, minus its extra
  scheduler round trip and failed read per exchange. A TLS stream goes through trio.
"""

from __future__ import annotations

import os
import select
from dataclasses import dataclass

import trio

from appliance.core.retry import TransportFailure
from appliance.core.schedules import Method
from appliance.engine.delivery.exchange import DeliveryFailed
from appliance.engine.delivery.request import RequestError, frame_request
from appliance.engine.delivery.response import ResponseError, ResponseReader

READ_SIZE = 64 * 1024


def _protocol(message: str) -> DeliveryFailed:
    return DeliveryFailed(TransportFailure.PROTOCOL, message)


def _broken(what: str, exc: BaseException) -> DeliveryFailed:
    cause = exc.__cause__ or exc
    return DeliveryFailed(TransportFailure.CONNECT, f"{what}: {str(cause) or type(cause).__name__}")


@dataclass(frozen=True, slots=True)
class Head:
    """The final response's status and headers (names lower-case)."""

    status: int
    headers: list[tuple[bytes, bytes]]


class Connection:
    """An open connection: the stream to speak over, the TCP socket beneath it, and the
    reader of the response in flight (None while idle)."""

    __slots__ = ("_probe", "_reader", "_stream", "_tcp", "idle_since")

    def __init__(self, stream: trio.abc.Stream, tcp: trio.SocketStream) -> None:
        self._stream = stream
        self._tcp = tcp
        self._reader: ResponseReader | None = None
        self._probe: select.poll | None = None  # is_quiet's poll of the socket, made once
        self.idle_since = 0.0  # trio time it was last put back in the pool

    async def send_request(
        self, method: Method, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        """Write the whole request, head and body, in one write."""
        try:
            data = frame_request(method, target, headers, body)
        except RequestError as exc:
            raise _protocol(f"the request cannot be framed: {exc}") from exc
        self._reader = ResponseReader()
        try:
            await self._write(data)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _broken("sending the request failed", exc) from exc

    async def receive_head(self) -> Head:
        """The final response head (1xx interim responses are skipped)."""
        reader = self._in_flight()
        while not reader.head:
            await self._read(reader)
        return Head(reader.status, reader.headers)

    async def read_excerpt(self, limit: int) -> tuple[bytes, str | None, bool]:
        """The first ``limit`` bytes of the body, the error that cut it short (if any), and
        whether the response was read to its end (so the connection may be reused).
        Stops reading at ``limit``: a body that ends within what arrived already keeps the
        connection (a body of exactly the limit), a longer one closes it."""
        reader = self._in_flight()
        try:
            while not reader.complete and len(reader.body) < limit:
                await self._read(reader)
        except DeliveryFailed as exc:
            error = f"reading the response body failed: {exc.message}"
            return bytes(reader.body[:limit]), error, False
        return bytes(reader.body[:limit]), None, reader.complete

    def start_next_exchange(self) -> bool:
        """Ready the connection for another request if the response allows it."""
        reader, self._reader = self._reader, None
        return reader is not None and reader.reusable

    def is_quiet(self) -> bool:
        """Idle, and the server has said nothing since (no EOF, no stray bytes)."""
        if self._reader is not None:
            return False
        fd = self._tcp.socket.fileno()
        if fd < 0:
            return False
        if self._probe is None:
            self._probe = select.poll()
            self._probe.register(fd, select.POLLIN)
        return not self._probe.poll(0)  # any event (data, EOF, hang-up, error) disqualifies

    def close(self) -> None:
        """Close at once, without a TLS close_notify (HTTP frames its own messages).

        Synchronous on purpose: it runs in cleanup paths that may already be cancelled."""
        self._tcp.socket.close()

    def _in_flight(self) -> ResponseReader:
        if self._reader is None:
            raise RuntimeError("no request in flight on this connection")
        return self._reader

    async def _write(self, data: bytes) -> None:
        if self._stream is not self._tcp:
            await self._stream.send_all(data)
            return
        await trio.lowlevel.checkpoint_if_cancelled()
        fd, view = self._tcp.socket.fileno(), memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)

    async def _receive(self) -> bytes:
        if self._stream is not self._tcp:
            data = await self._stream.receive_some(READ_SIZE)
            return data if isinstance(data, bytes) else bytes(data)
        fd = self._tcp.socket.fileno()
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                return os.read(fd, READ_SIZE)
            except BlockingIOError:  # woken for nothing: wait again
                continue

    async def _read(self, reader: ResponseReader) -> None:
        """Feed the reader what arrives next (b"" is end of file: the reader judges)."""
        try:
            data = await self._receive()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _broken("reading the response failed", exc) from exc
        try:
            reader.feed(data)
        except ResponseError as exc:
            raise _protocol(str(exc)) from exc
