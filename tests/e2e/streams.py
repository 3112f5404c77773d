"""Streams left behind, against a real appliance process: the ways a client opens
``/v1/events/stream`` (an API key) or the UI's ``/events/stream`` (a session cookie) and
leaves, and the appliance's open descriptors, read from ``/proc/<pid>/fd``.

Shared by ``tests/e2e/test_abandoned_streams.py`` and the chaos suite
(``tests/chaos/test_abandoned_streams.py``).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from urllib.parse import urlsplit

API_STREAM = "/v1/events/stream"
UI_STREAM = "/events/stream"


def stream_request(path: str, *, key: str = "", cookie: str = "") -> bytes:
    """The request head of a stream, authenticated by an API key or a session cookie."""
    auth = f"Authorization: Bearer {key}\r\n" if key else f"Cookie: steeple_session={cookie}\r\n"
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n".encode()


def open_stream(base_url: str, head: bytes, extra: bytes = b"") -> socket.socket:
    """A connection whose stream has started: its response head and first message read."""
    url = urlsplit(base_url)
    sock = socket.create_connection((url.hostname or "", url.port or 0), timeout=10)
    sock.sendall(head + extra)
    seen = b""
    while b"retry: " not in seen:  # the stream's first message: the server is streaming
        chunk = sock.recv(4096)
        assert chunk, f"the stream ended at once: {seen!r}"
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200"), seen
    return sock


# A way to leave returns the socket when the client keeps it open (to close later).
Leave = Callable[[socket.socket], socket.socket | None]


def close(sock: socket.socket) -> None:
    sock.close()


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0) instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def half_close(sock: socket.socket) -> socket.socket:
    """Shut the sending side only: the client still holds its socket, and could read."""
    sock.shutdown(socket.SHUT_WR)
    return sock


# How a client leaves: (name, bytes sent after the request, how the socket goes).
LEAVES: tuple[tuple[str, bytes, Leave], ...] = (
    ("blank line, close", b"\r\n", close),
    ("blank line, reset", b"\r\n", reset),
    ("pipelined request, close", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", close),
    ("one byte, half-close", b"x", half_close),
    ("close", b"", close),
    ("reset", b"", reset),
    ("half-close", b"", half_close),
)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_for_fds(pid: int, at_most: int, timeout: float = 10) -> int:
    """Poll the process's descriptor count until it is ``at_most``; the last count seen."""
    deadline = time.monotonic() + timeout
    while (count := open_fds(pid)) > at_most and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def settled_fds(pid: int, timeout: float = 10) -> int:
    """The process's descriptor count once it held still for half a second (readers,
    the database's files and the log opened lazily are counted in it)."""
    deadline = time.monotonic() + timeout
    last, since = open_fds(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        count = open_fds(pid)
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= 0.5:
            return count
    return last
