"""Delivery client micro-benchmark: N POSTs through the real delivery path.

``python -m bench.transport [--requests 5000] [--concurrency 1,16,64] [--runs 3]``

N deliveries through ``engine.delivery.send`` over a ``DeliveryClient`` — the production
path: the cached target check, the connect-time address check, the keep-alive connection pool —
at concurrency C to the loopback sink (``bench.sink``) running in its own process, over
keep-alive connections. Per run: requests/s (wall clock) and client CPU ms per request
(this process's CPU, so the sink's work is not counted). The client gets
``max_per_host = C`` so only the client limits throughput. Each run starts with a fresh
client and a warm-up of C requests (connections opened), which are not measured.

To compare two commits, run this on each, alternating, on the same machine
(bench/HISTORY.md records such pairs with their commit ids).
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from appliance.core.addresses import AddressPolicy
from appliance.core.delivery import DeliveryRequest
from appliance.engine.delivery import DeliveryClient, send
from bench import report

ROOT = Path(__file__).resolve().parent.parent
POLICY = AddressPolicy.parse(["127.0.0.0/8"])
BODY = b'{"schedule": "bench", "payload": "' + b"x" * 200 + b'"}'
HEADERS = (
    ("Content-Type", "application/json"),
    ("Accept-Encoding", "identity"),
    ("X-Idempotency-Key", "bench"),
)


@contextmanager
def sink() -> Iterator[int]:
    """``bench.sink`` in its own process; yields its port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.sink", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"the sink did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        proc.terminate()
        proc.wait(10)


async def deliver(url: str, requests: int, concurrency: int) -> report.Figures:
    """One run: ``requests`` deliveries at ``concurrency``, after a warm-up."""
    request = DeliveryRequest(url=url, headers=HEADERS, body=BODY)
    async with DeliveryClient(POLICY, max_per_host=concurrency) as client:
        await _fire(client, request, concurrency, concurrency)  # warm-up: open connections
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        await _fire(client, request, requests, concurrency)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"req_per_s": requests / wall, "cpu_ms_per_req": cpu * 1000 / requests}


async def _fire(
    client: DeliveryClient, request: DeliveryRequest, total: int, concurrency: int
) -> None:
    left = total

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            result = await send(client, request)
            if result.status != 200:
                raise RuntimeError(f"delivery failed: {result}")

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="POSTs per run")
    parser.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    parser.add_argument("--runs", type=int, default=3, help="runs per cell (median of these)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    groups: dict[str, list[report.Figures]] = {}
    with sink() as port:
        url = f"http://127.0.0.1:{port}/hook"
        for run in range(args.runs):
            for concurrency in levels:
                figures = trio.run(deliver, url, args.requests, concurrency)
                groups.setdefault(f"c={concurrency}", []).append(figures)
                print(f"  c={concurrency} run {run + 1}: {figures}", flush=True)
    params = {"requests": args.requests, "concurrency": args.concurrency, "runs": args.runs}
    report.publish("transport", params, groups)


if __name__ == "__main__":
    main()
