"""HTTP framing with a real hypercorn: a request answered without its body being read (a
405, a 401) must not wedge the keep-alive connection — the next request on it is answered;
a connection left idle after a response is closed by the keep-alive timer.

Found by schemathesis, which writes a request's head and body in separate packets: the
405 went out between them, and the next request on the connection was never answered."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from appliance.api import serving
from tests.e2e.harness import Appliance, create_tenant

pytestmark = pytest.mark.slow

BODY = b'{"name": "0", "scope": "read"}'


def head_of(method: str, key: str) -> bytes:
    return (
        f"{method} /v1/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode()


def read_response(sock: socket.socket) -> bytes:
    """One response: the head, then Content-Length bytes."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        rest += sock.recv(4096)
    return head


@pytest.mark.parametrize("method", ["TRACE", "DELETE"])
def test_an_early_answer_leaves_the_connection_usable(tmp_path: Path, method: str) -> None:
    key = create_tenant(tmp_path)["api_key"]
    app = Appliance(tmp_path).start()
    url = urlsplit(app.base_url)
    try:
        with socket.create_connection((url.hostname or "", url.port or 0), timeout=10) as sock:
            # Each request's head and body in separate packets, as schemathesis sent them:
            # the pause is packet timing, not a wait for anything to happen.
            for request, expected in ((method, b"HTTP/1.1 405"), ("POST", b"HTTP/1.1 201")):
                sock.sendall(head_of(request, key))
                time.sleep(0.05)
                sock.sendall(BODY)
                assert read_response(sock).startswith(expected)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(tmp_path: Path) -> None:
    app = Appliance(tmp_path).start()
    url = urlsplit(app.base_url)
    # Well before the read timeout: only the keep-alive timer can close it in time.
    within = serving.READ_TIMEOUT_S / 2
    assert within > serving.KEEP_ALIVE_TIMEOUT_S
    try:
        with socket.create_connection((url.hostname or "", url.port or 0), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert read_response(sock).startswith(b"HTTP/1.1 200")
            sock.settimeout(within)
            try:
                end: bytes | None = sock.recv(4096)
            except TimeoutError:
                end = None
            assert end == b"", f"an idle connection was still open after {within} s"
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
