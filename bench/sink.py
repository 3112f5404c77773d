"""The loopback sink: a tenant endpoint in its own process that answers 200 at once (or
after ``--answer-ms``, a receiver that does some work) and records every delivery, so
lateness, duplicates and losses are counted by the receiver.

``python -m bench.sink --port 0 [--out FILE] [--answer-ms N] [--hosts H]`` prints
``port <n>`` on stdout when it accepts connections (on 127.0.0.1 and, with ``--hosts H``,
on 127.0.0.2 … 127.0.0.<H + 1> at the same port: H receivers at distinct addresses). HTTP/1.1
keep-alive on raw asyncio protocols (no framework: the sink must never be the bottleneck).
Per request it records, at the moment the whole request has arrived: ``time.time_ns()``,
``X-Idempotency-Key``, ``X-Attempt``, ``X-Scheduled-For``.

A delivery to ``/mixed/<ms>`` is answered ``<ms>`` after it arrived (whatever
``--answer-ms`` says): a receiver whose latency the target URL sets, so a workload of
mixed latencies (:mod:`bench.mixed`) is the same for every system that delivers it. Answers
on one connection keep the requests' order.

Control requests (any method, any other path is a delivery):
- ``/_count`` → ``{"count": n, "distinct": distinct keys}``
- ``/_records`` → every record as JSON lines (``{"t": ns, "key", "attempt", "sf"}``)
- ``/_reset`` → forget every record
SIGTERM/SIGINT dumps the records to ``--out`` (JSON lines) and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path

Record = tuple[int, str, str, str]  # arrival ns, key, attempt, scheduled_for text

_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
_WANTED = {b"x-idempotency-key": 0, b"x-attempt": 1, b"x-scheduled-for": 2}


class Recorder:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.keys: set[str] = set()

    def lines(self) -> bytes:
        return "".join(
            json.dumps({"t": t, "key": k, "attempt": a, "sf": s}) + "\n"
            for t, k, a, s in self.records
        ).encode()

    def control(self, path: bytes) -> bytes | None:
        if path == b"/_count":
            return json.dumps({"count": len(self.records), "distinct": len(self.keys)}).encode()
        if path == b"/_records":
            return self.lines()
        if path == b"/_reset":
            self.records = []
            self.keys = set()
            return b"{}"
        return None


class SinkProtocol(asyncio.Protocol):
    """One keep-alive connection; pipelined requests are answered in order."""

    def __init__(self, recorder: Recorder, answer_s: float = 0.0) -> None:
        self.recorder = recorder
        self.answer_s = answer_s
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.last_answer = 0.0  # loop time of the latest answer scheduled (keeps order)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self._one_request():
            pass

    def _one_request(self) -> bool:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = bytes(self.buffer[:end]).split(b"\r\n")
        length, found = 0, ["", "", ""]
        for line in head[1:]:
            name, _, value = line.partition(b":")
            lname = name.strip().lower()
            if lname == b"content-length":
                length = int(value)
            elif lname in _WANTED:
                found[_WANTED[lname]] = value.strip().decode()
        if len(self.buffer) < end + 4 + length:
            return False
        arrived = time.time_ns()
        del self.buffer[: end + 4 + length]
        path = head[0].split(b" ")[1] if b" " in head[0] else b"/"
        answer = self.recorder.control(path) if path.startswith(b"/_") else None
        assert self.transport is not None
        if answer is None:
            self.recorder.records.append((arrived, found[0], found[1], found[2]))
            self.recorder.keys.add(found[0])
            delay = _mixed_delay(path)
            delay = self.answer_s if delay is None else delay
            loop = asyncio.get_running_loop()
            if delay or self.last_answer > loop.time():  # answered later, in arrival order
                self.last_answer = max(self.last_answer, loop.time() + delay)
                loop.call_at(self.last_answer, self._answer)
            else:
                self.transport.write(_OK)
        else:
            header = f"HTTP/1.1 200 OK\r\nContent-Length: {len(answer)}\r\n\r\n".encode()
            self.transport.write(header + answer)
        return True

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_OK)


def _mixed_delay(path: bytes) -> float | None:
    """``/mixed/<ms>`` → seconds; None for any other path."""
    if not path.startswith(b"/mixed/"):
        return None
    digits = path[len(b"/mixed/") :].split(b"?")[0]
    return int(digits) / 1000 if digits.isdigit() else None


async def serve(port: int, out: Path | None, answer_ms: int = 0, hosts: int = 0) -> None:
    recorder = Recorder()
    loop = asyncio.get_running_loop()

    def protocol() -> SinkProtocol:
        return SinkProtocol(recorder, answer_ms / 1000)

    server = await loop.create_server(protocol, "127.0.0.1", port, backlog=4096)
    bound = server.sockets[0].getsockname()[1]
    more = [
        await loop.create_server(protocol, f"127.0.0.{2 + k}", bound, backlog=4096)
        for k in range(hosts)
    ]
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    sys.stdout.write(f"port {bound}\n")
    sys.stdout.flush()
    await stop.wait()
    for listening in [server, *more]:
        listening.close()
    if out is not None:
        await asyncio.to_thread(out.write_bytes, recorder.lines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", type=Path, help="JSON lines written on SIGTERM")
    parser.add_argument("--answer-ms", type=int, default=0, help="answer each delivery after")
    parser.add_argument("--hosts", type=int, default=0, help="also on 127.0.0.2 … (max 250)")
    args = parser.parse_args()
    if not 0 <= args.hosts <= 250:
        parser.error("--hosts must be 0–250")
    asyncio.run(serve(args.port, args.out, args.answer_ms, args.hosts))


if __name__ == "__main__":
    main()
