"""The loopback sink: a tenant endpoint in its own process that answers 200 at once (or
after ``--answer-ms``, a receiver that does some work) and records every delivery, so
lateness, duplicates and losses are counted by the receiver.

``python -m bench.sink --port 0 [--out FILE] [--answer-ms N]`` prints ``port <n>`` on
stdout when it accepts connections. HTTP/1.1 keep-alive on raw asyncio protocols (no
framework: the sink must never be the bottleneck). Per request it records, at the moment
the whole request has arrived: ``time.time_ns()``, ``X-Idempotency-Key``, ``X-Attempt``,
``X-Scheduled-For``.

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
            if self.answer_s:  # recorded on arrival, answered later (in arrival order)
                asyncio.get_running_loop().call_later(self.answer_s, self._answer)
            else:
                self.transport.write(_OK)
        else:
            header = f"HTTP/1.1 200 OK\r\nContent-Length: {len(answer)}\r\n\r\n".encode()
            self.transport.write(header + answer)
        return True

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_OK)


async def serve(port: int, out: Path | None, answer_ms: int = 0) -> None:
    recorder = Recorder()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SinkProtocol(recorder, answer_ms / 1000), "127.0.0.1", port, backlog=4096
    )
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    bound = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"port {bound}\n")
    sys.stdout.flush()
    await stop.wait()
    server.close()
    if out is not None:
        await asyncio.to_thread(out.write_bytes, recorder.lines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", type=Path, help="JSON lines written on SIGTERM")
    parser.add_argument("--answer-ms", type=int, default=0, help="answer each delivery after")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.out, args.answer_ms))


if __name__ == "__main__":
    main()
