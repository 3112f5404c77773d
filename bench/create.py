"""create: schedules created through the API → creates/s from 1 and from 8 concurrent
clients (``POST /v1/schedules``), and schedules/s in batches (``POST /v1/schedules/batch``).

Setup (not measured): a fresh data directory with one tenant (its write key), the
appliance started on loopback with ``max_schedules_per_tenant`` raised out of the way.
Measured against the running appliance, from this process: C clients (trio tasks, each
with its own ``httpx.AsyncClient`` and keep-alive connection) each send N/C sequential
creates of the same body, a cron schedule firing once a year (``0 0 1 1 *`` in a few
zones, round-robin, so nothing is delivered during the benchmark and the planner has
nothing to do: the figure is the create path alone), targeting ``127.0.0.1:9``.
``*_per_s`` = creates acknowledged (201) / wall time from the first request sent to the
last answer; ``*_p50_ms``/``*_p99_ms`` each request's client-observed latency;
``*_cpu_ms`` the appliance's CPU (all threads, /proc) per schedule created,
``*_cpu_loop_ms`` the part of it on the event loop's thread (the rest: SQLite and
to_thread workers), and ``*_client_cpu_ms`` this process's (the client shares the
machine's cores).
Batches: B sequential requests of S items each from one client (``batch_per_s`` =
schedules created / wall time).

``python -m bench.create [--creates 2000] [--batches 10] [--batch-size 1000] [--runs 3]
[--profile]``: ``--profile`` adds one run with the appliance under cProfile (its event-loop
thread; ``bench/results/create.pstats``, read it with ``python -m pstats``).
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import trio

from bench import seed
from bench.processes import Appliance, cpu_seconds, thread_cpu
from bench.report import Figures, base_parser, percentile, publish, repeat

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata")
TARGET = "http://127.0.0.1:9/hook"
CONCURRENCY = (1, 8)
WARM_UP = 20  # creates before the clock starts: connections, caches


def schedule_body(i: int) -> dict[str, object]:
    return {
        "name": f"import {i}",
        "cron": "0 0 1 1 *",
        "timezone": ZONES[i % len(ZONES)],
        "target_url": TARGET,
        "payload": {"customer": i, "report": "yearly"},
    }


async def _creates(
    base_url: str, api_key: str, clients: int, total: int
) -> tuple[float, list[float]]:
    """``total`` single creates from ``clients`` concurrent clients: (wall s, latencies ms)."""
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {api_key}"}

    async def client(first: int, count: int) -> None:
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as http:
            for i in range(first, first + count):
                began = time.perf_counter()
                reply = await http.post("/v1/schedules", json=schedule_body(i))
                latencies.append((time.perf_counter() - began) * 1000)
                if reply.status_code != 201:
                    raise RuntimeError(f"create: {reply.status_code} {reply.text[:300]}")

    share = total // clients
    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for c in range(clients):
            nursery.start_soon(client, c * share, share)
    return time.perf_counter() - began, latencies


async def _batches(
    base_url: str, api_key: str, batches: int, size: int
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=120) as http:
        began = time.perf_counter()
        for b in range(batches):
            items = [schedule_body(b * size + i) for i in range(size)]
            sent = time.perf_counter()
            reply = await http.post("/v1/schedules/batch", json={"schedules": items})
            latencies.append((time.perf_counter() - sent) * 1000)
            if reply.status_code != 201 or len(reply.json()["items"]) != size:
                raise RuntimeError(f"batch: {reply.status_code} {reply.text[:300]}")
        return time.perf_counter() - began, latencies


def _measured(
    name: str, app: Appliance, count: int, work: Callable[[], tuple[float, list[float]]]
) -> Figures:
    cpu0, threads0, client0 = cpu_seconds(app.pid), thread_cpu(app.pid), time.process_time()
    wall, latencies = work()
    cpu, client = cpu_seconds(app.pid) - cpu0, time.process_time() - client0
    main_thread = thread_cpu(app.pid).get("python", 0.0) - threads0.get("python", 0.0)
    return {
        f"{name}_per_s": count / wall,
        f"{name}_p50_ms": percentile(latencies, 50),
        f"{name}_p99_ms": percentile(latencies, 99),
        f"{name}_cpu_ms": 1000 * cpu / count,
        f"{name}_cpu_loop_ms": 1000 * main_thread / count,
        f"{name}_client_cpu_ms": 1000 * client / count,
    }


def create_once(
    workdir: Path,
    *,
    creates: int,
    batches: int,
    batch_size: int,
    profile_to: Path | None = None,
) -> Figures:
    data_dir = Path(tempfile.mkdtemp(prefix="create-", dir=workdir))
    db = seed.open_store(data_dir)
    try:
        tenant = seed.new_tenant(db, name="bench", now=int(time.time() * 1000))
    finally:
        db.close()
    prefix = _profiler(profile_to) if profile_to else ()
    limit = str(max(1_000_000, 2 * creates + batches * batch_size))
    env = {"STEEPLE_MAX_SCHEDULES_PER_TENANT": limit}
    app = Appliance(data_dir, env=env, prefix=prefix).start()
    figures: Figures = {}
    try:
        url, key = app.base_url, tenant.api_key
        trio.run(_creates, url, key, 1, WARM_UP)
        for clients in CONCURRENCY:
            count = creates // clients * clients
            run = functools.partial(trio.run, _creates, url, key, clients, count)
            figures |= _measured(f"single_{clients}", app, count, run)
        if batches:
            run = functools.partial(trio.run, _batches, url, key, batches, batch_size)
            figures |= _measured("batch", app, batches * batch_size, run)
    finally:
        app.stop()
    return figures


def _profiler(out: Path) -> tuple[str, ...]:
    """cProfile (stdlib): the event loop's thread only; SQLite's workers are not in it."""
    return ("-m", "cProfile", "-o", str(out), "-m")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=2000, help="single creates per setting")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--profile", action="store_true", help="one extra run under pyinstrument")
    args = parser.parse_args()
    sizes = {"creates": args.creates, "batches": args.batches, "batch_size": args.batch_size}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        runs = repeat(args.runs, lambda _i: create_once(work, **sizes))
        extra = {}
        if args.profile:
            out = Path(__file__).resolve().parent / "results" / "create.pstats"
            out.parent.mkdir(exist_ok=True)
            create_once(work, **sizes, profile_to=out)
            extra["profile"] = str(out)
    publish("create", sizes, {"create": runs}, extra=extra)


if __name__ == "__main__":
    main()
