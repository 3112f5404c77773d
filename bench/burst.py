"""burst: N occurrences due at the same second → time until the sink has all of them,
lateness percentiles, losses (must be 0), appliance CPU seconds.

Setup (not measured): N schedules ``S M H * * *`` (seconds-first, UTC) firing once at one
chosen whole second T (now + ``--lead`` s), created through the store's
``create_schedule`` in the data dir before the appliance starts. Measured from the sink:
``all_delivered_s`` = last first-arrival − T. CPU = the appliance's user+system seconds
from just after it reported "listening" until the sink has all (planning included).

``--store-cpu``: one extra run under :mod:`bench.store_calls`, which adds the worker
threads' CPU per delivery by store function (claims, completions, planning, reads, the
group commits' own statements) to that run's figures.

``python -m bench.burst [--size 10000] [--runs 3] [--profile] [--store-cpu]``
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from appliance.core.ids import idempotency_key
from appliance.core.instants import format_scheduled_for
from appliance.store.infra.backend import Store
from bench import seed
from bench.deliveries import judge
from bench.processes import Appliance, Sink, cpu_seconds, sink, thread_cpu
from bench.report import Figures, base_parser, publish, repeat


def daily_at(moment_ms: int) -> str:
    """A six-field, seconds-first cron firing daily at ``moment_ms`` (UTC, whole second)."""
    t = time.gmtime(moment_ms // 1000)
    return f"{t.tm_sec} {t.tm_min} {t.tm_hour} * * *"


def prepare(
    data_dir: Path, *, n: int, url: str, at_ms: int, urls: Sequence[str] | None = None
) -> dict[str, int]:
    """N schedules firing at ``at_ms`` in the data dir's file; the expected key →
    scheduled_for map."""
    db = seed.open_store(data_dir)
    try:
        return prepare_store(db, n=n, url=url, at_ms=at_ms, urls=urls)
    finally:
        db.close()


def prepare_store(
    db: Store, *, n: int, url: str, at_ms: int, urls: Sequence[str] | None = None
) -> dict[str, int]:
    """N schedules firing at ``at_ms`` in an open store (SQLite or PostgreSQL); schedule
    ``i`` targets ``urls[i]`` when given (:mod:`bench.mixed`), else ``url``."""
    now = int(time.time() * 1000)
    tenant = seed.new_tenant(db, name="bench", now=now)
    cron = daily_at(at_ms)
    specs = [seed.spec(target_url=urls[i] if urls else url, cron=cron, name=f"b{i}")
             for i in range(n)]  # fmt: skip
    ids = seed.create_schedules(db, tenant_id=tenant.tenant_id, specs=specs, now=now)
    text = format_scheduled_for(at_ms)
    return {idempotency_key(sid, text): at_ms for sid in ids}


def burst_once(
    workdir: Path,
    *,
    n: int,
    lead_s: float = 12.0,
    timeout_s: float = 120.0,
    profile_to: Path | None = None,
    store_calls_to: Path | None = None,
    the_sink: Sink,
    urls: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Figures:
    """``env``: settings for the appliance's process (``STEEPLE_…``, docs/configuration.md)."""
    data_dir = Path(tempfile.mkdtemp(prefix="burst-", dir=workdir))
    the_sink.reset()
    at_ms = (int(time.time() * 1000) // 1000 + int(lead_s) + 1) * 1000
    expected = prepare(data_dir, n=n, url=the_sink.url, at_ms=at_ms, urls=urls)
    prefix = _profiler(profile_to) if profile_to else ()
    process_env = dict(env or {})
    if store_calls_to is not None:
        prefix = ("-m", "bench.store_calls")
        process_env["STEEPLE_BENCH_STORE_CALLS"] = str(store_calls_to)
    app = Appliance(data_dir, prefix=prefix, env=process_env).start()
    try:
        if time.time() * 1000 > at_ms - 2_500:
            raise RuntimeError(f"setup took too long for --lead {lead_s}: raise it")
        cpu0, threads0 = cpu_seconds(app.pid), thread_cpu(app.pid)
        budget = at_ms / 1000 - time.time() + timeout_s
        the_sink.wait_distinct(n, timeout=budget)
        cpu = cpu_seconds(app.pid) - cpu0
        threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu(app.pid).items()}
    finally:
        app.stop()
    verdict = judge(the_sink.records(), expected)
    last = max(verdict.first_arrival.values(), default=0) / 1e6
    figures: Figures = {
        "all_delivered_s": (last - at_ms) / 1000 if verdict.lost == 0 else float("nan"),
        **verdict.figures(expected),
        "cpu_s": cpu,
        "cpu_ms_per_delivery": 1000 * cpu / max(verdict.delivered, 1),
        "cpu_main_thread_s": threads.get("python", 0.0),
        "cpu_worker_threads_s": sum(v for k, v in threads.items() if k != "python"),
    }
    if store_calls_to is not None:  # the whole process's store calls (setup excluded)
        figures.update(store_figures(store_calls_to, deliveries=max(verdict.delivered, 1)))
    return figures


def store_figures(path: Path, *, deliveries: int) -> Figures:
    """``bench.store_calls``'s counts as figures: worker CPU ms per delivery by store
    function, and how many calls (or batched items) and group commits there were."""
    found = json.loads(path.read_text())
    figures: Figures = {}
    for name, (items, cpu_s) in sorted(found["calls"].items(), key=lambda kv: -kv[1][1]):
        figures[f"store {name} ms/delivery"] = 1000 * cpu_s / deliveries
        figures[f"store {name} calls"] = items
    figures["store group commits"] = sum(found["groups"].values())
    for name, n in found.get("alone", {}).items():
        figures[f"store {name} alone in a group"] = n
    return figures


def _profiler(out: Path) -> tuple[str, ...]:
    return ("-m", "pyinstrument", "--renderer", "text", "--show-all", "-o", str(out), "-m")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--lead", type=float, default=12.0, help="seconds until the burst")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--profile", action="store_true", help="one extra run under pyinstrument")
    parser.add_argument("--store-cpu", action="store_true",
                        help="one extra run with the CPU of every store call counted")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp, sink() as the_sink:
        work = Path(tmp)
        runs = repeat(
            args.runs,
            lambda _i: burst_once(
                work, n=args.size, lead_s=args.lead, timeout_s=args.timeout, the_sink=the_sink
            ),
        )
        extra: dict[str, object] = {}
        if args.profile:
            out = Path(__file__).resolve().parent / "results" / f"burst-{args.size}-profile.txt"
            out.parent.mkdir(exist_ok=True)
            burst_once(work, n=args.size, lead_s=args.lead, timeout_s=args.timeout,
                       profile_to=out, the_sink=the_sink)  # fmt: skip
            extra["profile"] = str(out)
        if args.store_cpu:
            calls = work / "store-calls.json"
            store_cpu = burst_once(work, n=args.size, lead_s=args.lead, timeout_s=args.timeout,
                                   store_calls_to=calls, the_sink=the_sink)  # fmt: skip
            extra["store_cpu"] = store_cpu
            print("  store calls: " + ", ".join(
                f"{k}={v:.3g}" for k, v in store_cpu.items() if k.startswith("store")
            ))  # fmt: skip
    publish("burst", {"size": args.size, "lead_s": args.lead}, {f"burst {args.size}": runs},
            extra=extra)  # fmt: skip


if __name__ == "__main__":
    main()
