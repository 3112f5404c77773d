"""Live event-stream clients for benchmarks: N ``GET /v1/events/stream`` connections, each
read by a thread that counts the events it receives."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(eq=False)
class _Stream:
    conn: http.client.HTTPConnection
    thread: threading.Thread | None = None
    events: int = 0


@dataclass(eq=False)
class Streams:
    """Streams attached to one appliance; ``events`` counts what all of them received."""

    streams: list[_Stream] = field(default_factory=list)

    @property
    def events(self) -> int:
        return sum(s.events for s in self.streams)


def _read(stream: _Stream, response: http.client.HTTPResponse) -> None:
    with contextlib.suppress(OSError, http.client.HTTPException):
        while line := response.readline():
            if line.startswith(b"id: "):
                stream.events += 1


@contextlib.contextmanager
def attached(base_url: str, api_key: str, count: int) -> Iterator[Streams]:
    url = urlsplit(base_url)
    streams = Streams()
    try:
        for _ in range(count):
            conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=120)
            conn.request("GET", "/v1/events/stream", headers={"Authorization": f"Bearer {api_key}"})
            response = conn.getresponse()
            if response.status != 200:
                raise RuntimeError(f"stream: {response.status} {response.read()[:200]!r}")
            stream = _Stream(conn=conn)
            stream.thread = threading.Thread(target=_read, args=(stream, response), daemon=True)
            stream.thread.start()
            streams.streams.append(stream)
        yield streams
    finally:
        for stream in streams.streams:
            if stream.conn.sock is not None:
                with contextlib.suppress(OSError):
                    stream.conn.sock.shutdown(socket.SHUT_RDWR)
            if stream.thread is not None:
                stream.thread.join(10)
            stream.conn.close()
