"""A tenant receiver as its own process, for tests/e2e/test_receiver_crash.py: the
transactional pattern of docs/receiver.md (verify, then ``SqliteDeduper.once`` with the
effect — a row in ``effects`` — in the same transaction), serving on a listening socket
inherited from the test (``--fd``), so the socket and its queue of connections outlive
every killed receiver.

With ``--crash-at POINT`` the process SIGKILLs itself at POINT while handling the first
new first-attempt delivery it can take alone (no other request in flight, so the kill hits
one delivery only): ``before_effect`` (key row written, effect not), ``after_effect``
(both written, not committed) or ``after_commit`` (committed, not answered). Before dying
it appends ``POINT KEY`` to ``--crash-log``.

    python -m tests.e2e.receiver_process --fd N --db PATH --secret whsec_… [--crash-at …]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from appliance.receiver import (
    DeliveryInProgress,
    Receiver,
    SqliteDeduper,
    VerificationError,
    VerifiedDelivery,
)

POINTS = ("before_effect", "after_effect", "after_commit")


class Crasher:
    """Decides, once per process, which delivery dies at ``point``."""

    def __init__(self, point: str | None, log: Path) -> None:
        self.point = point
        self.log = log
        self.in_flight = 0
        self.victim: str | None = None
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.in_flight += 1

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def choose(self, delivery: VerifiedDelivery) -> None:
        """Make ``delivery`` the victim if it is a first attempt handled alone."""
        with self.lock:
            if self.point and self.victim is None and delivery.attempt == 1 and self.in_flight == 1:
                self.victim = delivery.idempotency_key

    def at(self, point: str, delivery: VerifiedDelivery) -> None:
        if point == self.point and delivery.idempotency_key == self.victim:
            with self.log.open("a", encoding="utf-8") as log:
                log.write(f"{point} {delivery.idempotency_key}\n")
                log.flush()
                os.fsync(log.fileno())
            os.kill(os.getpid(), signal.SIGKILL)


def serve(
    listener: socket.socket, receiver: Receiver, deduper: SqliteDeduper, crasher: Crasher
) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            crasher.enter()
            try:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, extra = self.handle_delivery(body)
            finally:
                crasher.leave()
            self.send_response(status)
            for name, value in extra:
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def handle_delivery(self, body: bytes) -> tuple[int, list[tuple[str, str]]]:
            now_s = int(time.time())
            try:
                delivery = receiver.verify(self.headers, body, now_s=now_s)
                with deduper.once(delivery.idempotency_key, now_s=now_s) as first:
                    if first:
                        crasher.choose(delivery)
                        crasher.at("before_effect", delivery)
                        deduper.connection.execute(
                            "INSERT INTO effects (key, pid) VALUES (?, ?)",
                            (delivery.idempotency_key, os.getpid()),
                        )
                        crasher.at("after_effect", delivery)
                crasher.at("after_commit", delivery)
            except VerificationError:
                return 401, []
            except DeliveryInProgress as exc:
                return 409, [("Retry-After", str(exc.retry_after_s))]
            return 200, []

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(listener.getsockname(), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    server.daemon_threads = True
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--crash-at", choices=POINTS)
    parser.add_argument("--crash-log", type=Path, default=Path(os.devnull))
    args = parser.parse_args()
    deduper = SqliteDeduper(args.db, timeout_s=30)
    deduper.connection.execute("CREATE TABLE IF NOT EXISTS effects (key TEXT, pid INTEGER)")
    receiver = Receiver(secrets=(args.secret,), deduper=deduper)
    listener = socket.socket(fileno=args.fd)
    serve(listener, receiver, deduper, Crasher(args.crash_at, args.crash_log))


if __name__ == "__main__":
    main()
