"""Transport micro-benchmark: the httpcore-based guarded transport against Steeple's h11 one.

``python -m bench.transport [--requests 5000] [--concurrency 1,16,64] [--runs 3]``

N POSTs through ``outbound.send`` — the real delivery path: a ``DeliveryClient`` handing
httpx requests straight to the guarded transport, with the connect-time address check — at
concurrency C to the loopback sink (``bench.sink``) running in its own process, over
keep-alive connections. Per run: requests/s (wall clock) and client CPU ms per request
(this process's CPU, so the sink's work is not counted).

- ``old``: the last httpcore-based ``appliance/engine/transport.py``, loaded from git
  (``--old-ref``) into a module of its own, so both run side by side in one process.
- ``new``: the current ``appliance.engine.transport`` (h11 on trio).

Both get ``max_per_host = C`` so only the transport limits throughput. Runs alternate old
and new, so a noisy neighbour hurts both alike. Each run starts with fresh clients and a
warm-up of C requests (connections opened), which are not measured.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from appliance.core.addresses import AddressPolicy
from appliance.core.delivery import DeliveryRequest
from appliance.engine import transport as new_transport
from appliance.engine.outbound import send
from bench import report

ROOT = Path(__file__).resolve().parent.parent
OLD_REF = "029a11e51561534fa173c2f07bf8a6b44c030ea2"  # last httpcore-based transport.py
POLICY = AddressPolicy.parse(["127.0.0.0/8"])
BODY = b'{"schedule": "bench", "payload": "' + b"x" * 200 + b'"}'
HEADERS = (
    ("Content-Type", "application/json"),
    ("Accept-Encoding", "identity"),
    ("X-Idempotency-Key", "bench"),
)

BuildClient = Callable[..., new_transport.DeliveryClient]


def load_old(ref: str) -> types.ModuleType:
    """``appliance/engine/transport.py`` as it was at ``ref``, as a separate module."""
    source = subprocess.run(
        ["git", "show", f"{ref}:appliance/engine/transport.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("bench_old_transport")
    module.__file__ = f"<git {ref[:10]}:appliance/engine/transport.py>"
    sys.modules[module.__name__] = module  # dataclasses look their module up here
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def old_client(old: types.ModuleType) -> BuildClient:
    """The old module's transport behind today's delivery client, so only transports differ."""

    def build(policy: AddressPolicy, *, max_per_host: int) -> new_transport.DeliveryClient:
        return new_transport.DeliveryClient(
            transport=old.GuardedTransport(policy, max_per_host=max_per_host)
        )

    return build


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


async def _deliver(build: BuildClient, url: str, requests: int, concurrency: int) -> report.Figures:
    request = DeliveryRequest(url=url, headers=HEADERS, body=BODY)
    async with build(POLICY, max_per_host=concurrency) as client:
        await _fire(client, request, concurrency, concurrency)  # warm-up: open connections
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        await _fire(client, request, requests, concurrency)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"req_per_s": requests / wall, "cpu_ms_per_req": cpu * 1000 / requests}


async def _fire(
    client: new_transport.DeliveryClient, request: DeliveryRequest, total: int, concurrency: int
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
    parser.add_argument("--old-ref", default=OLD_REF, help="git revision of the old transport")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    clients: dict[str, BuildClient] = {
        "old": old_client(load_old(args.old_ref)),
        "new": new_transport.build_client,
    }
    groups: dict[str, list[report.Figures]] = {}
    with sink() as port:
        url = f"http://127.0.0.1:{port}/hook"
        for concurrency in levels:
            for run in range(args.runs):
                for name, build in clients.items():
                    figures = trio.run(_deliver, build, url, args.requests, concurrency)
                    groups.setdefault(f"c={concurrency} {name}", []).append(figures)
                    print(f"  c={concurrency} {name} run {run + 1}: {figures}", flush=True)
    params = {"requests": args.requests, "concurrency": args.concurrency, "runs": args.runs,
              "old_ref": args.old_ref[:10]}  # fmt: skip
    report.publish("transport", params, groups)


if __name__ == "__main__":
    main()
