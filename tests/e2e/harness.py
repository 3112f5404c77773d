"""Real processes for end-to-end tests: the appliance as a subprocess, and a recording
tenant endpoint on loopback that can hold requests open (to kill the appliance mid-delivery).

The endpoint decides per delivery how to answer (:class:`Action`): answer with a status,
answer late (past the attempt's deadline), drop the connection without answering after
recording the effect (a lost acknowledgement), hold it open until ``release()``, and run a
hook right after the answer was written (to kill the appliance between a delivery and the
commit of its outcome). The chaos suite (tests/chaos) builds on this module.

Waits are on conditions with generous timeouts, never sleeps.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

LISTENING = re.compile(r'listening on ([^\s"]+)')  # text or JSON log lines
FORM_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass(frozen=True)
class Delivery:
    key: str
    attempt: int
    scheduled_for: str
    run_id: str
    schedule_id: str
    headers: dict[str, str]
    body: bytes
    arrived: float = 0.0  # time.monotonic() when the request was read
    method: str = "POST"


@dataclass(frozen=True)
class Action:
    """How the endpoint answers one delivery (after recording it, always).

    ``delay_s`` waits before answering (or before dropping); ``drop`` closes the connection
    without an answer; ``hold`` keeps the request open until ``Receiver.release()``, then
    drops it; ``after`` runs once the answer has been written."""

    status: int = 200
    delay_s: float = 0.0
    drop: bool = False
    hold: bool = False
    after: Callable[[], None] | None = None


ANSWER = Action()
HOLD = Action(hold=True)


def steeple(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "appliance", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


DATABASE_NOTICE = re.compile(r"^steeple: database |: steeple \S+: database ")


def error_lines(stderr: str) -> list[str]:
    """What a failing command printed besides the notice of the database it opened (every
    command names it: ``steeple: database …``, or serve's start-up log line)."""
    return [line for line in stderr.strip().splitlines() if not DATABASE_NOTICE.search(line)]


def create_tenant(data_dir: Path, name: str = "acme", *, database: str = "") -> dict[str, str]:
    """``steeple tenant create``; on ``database`` (a postgresql:// URL) when given."""
    # Commands other than serve and init refuse a data directory that does not exist.
    data_dir.mkdir(parents=True, exist_ok=True)
    on = ("--database", database) if database else ()
    done = steeple("tenant", "create", name, "--data-dir", str(data_dir), *on)
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


class Appliance:
    """``steeple serve`` in a subprocess on a free loopback port. ``env`` adds environment
    variables (libfaketime's, for instance)."""

    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra = extra
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.log: list[str] = []

    def start(self, timeout: float = 30) -> Appliance:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "appliance",
                "serve",
                "--data-dir",
                str(self.data_dir),
                "--listen",
                "127.0.0.1:0",
                "--allow-target",
                "127.0.0.0/8",
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(self.env or {})},
        )
        ready = threading.Event()
        self._reader = threading.Thread(target=self._read_log, args=(ready,), daemon=True)
        self._reader.start()
        if not ready.wait(timeout) or not self.base_url:
            self.kill()
            raise AssertionError("appliance did not start:\n" + "".join(self.log))
        return self

    def _read_log(self, ready: threading.Event) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            match = LISTENING.search(line)
            if match and not self.base_url:
                self.base_url = match.group(1).replace("0.0.0.0", "127.0.0.1")
                if not self.base_url.startswith("http"):
                    self.base_url = "http://" + self.base_url
                ready.set()
        ready.set()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code

    def client(self, api_key: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=10,
            trust_env=False,
            # Drop an idle connection well before the appliance's keep-alive timeout ends
            # it: a request sent as the server closes gets no answer, and httpx does not
            # retry a POST (a test that waited on subprocesses between requests saw it).
            limits=httpx.Limits(keepalive_expiry=1.0),
        )


class _QuietServer(http.server.ThreadingHTTPServer):
    """A killed appliance resets its connections mid-request: expected here, not an error
    to print. Anything else still is."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass
class Receiver:
    """A tenant endpoint on 127.0.0.1 that records every delivery.

    ``respond`` decides, per delivery, how to answer (:class:`Action`); by default it asks
    ``hold`` whether to keep the request open until ``release()`` (the response then never
    reaches a killed appliance)."""

    hold: Callable[[Delivery], bool] = lambda _d: False
    respond: Callable[[Delivery], Action] | None = None
    deliveries: list[Delivery] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _released: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                delivery = Delivery(
                    key=headers["x-idempotency-key"],
                    attempt=int(headers["x-attempt"]),
                    # a failure notification names no occurrence (docs/receiver.md)
                    scheduled_for=headers.get("x-scheduled-for", ""),
                    run_id=headers.get("x-run-id", ""),
                    schedule_id=headers.get("x-schedule-id", ""),
                    headers=headers,
                    body=body,
                    arrived=time.monotonic(),
                    method=self.command,
                )
                with receiver._cond:
                    receiver.deliveries.append(delivery)
                    receiver._cond.notify_all()
                action = receiver.action_for(delivery)
                if action.delay_s:
                    receiver._released.wait(action.delay_s)
                if action.hold:
                    receiver._released.wait(60)
                if action.hold or action.drop:
                    self._drop()
                    return
                try:
                    self.send_response(action.status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # answered too late: the client gave up
                    return
                if action.after is not None:
                    action.after()

            # Every method a schedule may use (docs/schedules.md, "HTTP methods").
            do_PUT = do_PATCH = do_GET = do_DELETE = do_POST

            def _drop(self) -> None:
                """Close without answering: the client sees the connection end."""
                self.close_connection = True
                with contextlib.suppress(OSError):  # the client may already be gone
                    self.connection.shutdown(socket.SHUT_RDWR)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def action_for(self, delivery: Delivery) -> Action:
        if self.respond is not None:
            return self.respond(delivery)
        return HOLD if self.hold(delivery) else ANSWER

    def snapshot(self) -> list[Delivery]:
        with self._cond:
            return list(self.deliveries)

    def wait_for(self, predicate: Callable[[list[Delivery]], bool], timeout: float = 30) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.deliveries), timeout):
                raise AssertionError(f"timed out; received {len(self.deliveries)} deliveries")

    def release(self) -> None:
        self._released.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def by_key(deliveries: list[Delivery]) -> dict[str, list[Delivery]]:
    grouped: dict[str, list[Delivery]] = {}
    for d in deliveries:
        grouped.setdefault(d.key, []).append(d)
    return grouped


def iter_pages(client: httpx.Client, path: str) -> Iterator[dict[str, Any]]:
    cursor: str | None = None
    while True:
        params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        page = client.get(path, params=params).json()
        yield from page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return


def sign_in_form(client: httpx.Client, email: str, password: str) -> httpx.Response:
    """A web UI sign-in as a browser does it: the form fetched (its pre-session cookie and
    token, docs/ui.md "Security"), then posted."""
    found = FORM_TOKEN.search(client.get("/login").text)
    token = found.group(1) if found else ""
    return client.post("/login", data={"email": email, "password": password, "csrf_token": token})
