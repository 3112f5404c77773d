"""Live event-stream clients for benchmarks: N ``GET /v1/events/stream`` connections, each
read by a thread that counts the events it receives.

Each stream resumes from the newest event stored when it attaches (``Last-Event-ID``), as a
client that was already following the feed does: a stream started from the beginning would
first replay the whole history (every run event since the appliance started), a one-off
cost per stream that is not the live fan-out being measured."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import apsw


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


def newest_seq(db_path: Path) -> int:
    """The newest event's ``seq`` in a live appliance's database (0 when there is none)."""
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = conn.execute("SELECT max(seq) FROM events").fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    finally:
        conn.close()


@contextlib.contextmanager
def attached(base_url: str, api_key: str, count: int, *, db_path: Path) -> Iterator[Streams]:
    url = urlsplit(base_url)
    streams = Streams()
    try:
        for _ in range(count):
            conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=120)
            headers = {
                "Authorization": f"Bearer {api_key}",
                "Last-Event-ID": str(newest_seq(db_path)),
            }
            conn.request("GET", "/v1/events/stream", headers=headers)
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
