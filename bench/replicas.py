"""replicas: the burst, and a sustained rate, drained by 1, 2, 3 … Steeple replicas
sharing one PostgreSQL database, beside the same workloads on SQLite (one process), in
one run, with PostgreSQL's own CPU counted.

A throwaway PostgreSQL server (:mod:`bench.pgserver`) runs for the whole benchmark; each
run gets a fresh database. The replicas are ``steeple serve`` processes
(:class:`bench.processes.Appliance`, each its own data dir, ``STEEPLE_DATABASE`` the
database, every other setting the default) delivering to the loopback sink.

Arms: ``sqlite`` is :func:`bench.burst.burst_once` / :func:`bench.steady.steady_once`
unchanged; ``pg ×R`` is the same setup written into PostgreSQL through the same store
functions, drained by R replicas. Figures per run:

- burst (N schedules firing at one whole second T, created before the replicas start):
  ``drain_per_s`` = delivered / (last first-arrival − T); ``all_delivered_s``; lateness
  p50/p99 (first arrival − T); ``lost`` (must be 0); ``duplicate_deliveries`` (arrivals
  beyond the first per key: at-least-once allows them); ``duplicate_runs`` (job_runs
  rows beyond the first per occurrence: must be 0); CPU from the moment every replica
  listens until the sink has all, of the replicas (``cpu_steeple_*``) and of the
  PostgreSQL server (``cpu_postgres_*``: postmaster, backends and background processes);
  ``retries`` = serialization failures and deadlocks the server logged (each one a
  transaction run again); ``transactions_per_delivery`` (committed + rolled back);
  ``round_trips_per_delivery`` (the replicas' waits for the server, counted by the store:
  :func:`bench.pgserver.round_trips`);
  ``replicas_delivering`` and ``busiest_share`` (of attempts, by incarnation).
- sustained (R schedules firing every second, a window of S seconds):
  :func:`bench.steady.measure_window`'s figures, CPU split the same way.
- ``load_1m``: the machine's 1-minute load average as the run ended (it is shared).

``python -m bench.replicas [--replicas 1,2,3] [--burst 2000] [--sustained-rate 200]
[--seconds 20] [--runs 3] [--pg-cpus LIST]`` (``--burst 0`` or ``--sustained-rate 0``
skips that part).

``--pg-cpus 0`` pins the PostgreSQL server to CPU 0 (the replicas keep every CPU); with
a ×1 arm, each ×R arm's burst gain is printed beside the gain its CPU figures predict
(:mod:`bench.replica_scaling`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path

from appliance.store.infra.postgres.database import PgDatabase
from bench import burst, pgserver, replica_scaling, steady
from bench.deliveries import judge
from bench.pgserver import Server
from bench.processes import Appliance, Sink, cpu_seconds, sink
from bench.report import Figures, base_parser, publish

SQLITE = "sqlite"


def arm_name(replicas: int) -> str:
    return f"pg ×{replicas}"


@contextmanager
def replicas(workdir: Path, count: int, dsn: str) -> Iterator[list[Appliance]]:
    """``count`` replicas on one database, each with its own data dir; all stopped after."""
    apps = [
        Appliance(
            Path(tempfile.mkdtemp(prefix=f"replica{i}-", dir=workdir)),
            env={"STEEPLE_DATABASE": dsn},
        )
        for i in range(count)
    ]
    try:
        with ThreadPoolExecutor(count) as starting:  # boots overlap: the lead stays short
            for started in [starting.submit(app.start) for app in apps]:
                started.result()
        yield apps
    finally:
        for app in apps:
            app.stop()


def _steeple_cpu(apps: list[Appliance]) -> Callable[[], float]:
    pids = [app.pid for app in apps]
    return lambda: sum(cpu_seconds(pid) for pid in pids)


def _seeded(dsn: str, fill: Callable[[PgDatabase], object]) -> None:
    db = PgDatabase.open(dsn, pool_size=1)  # migrates the empty database
    try:
        fill(db)
    finally:
        db.close()


def _cpu_figures(steeple_s: float, postgres_s: float, delivered: int) -> Figures:
    per = 1000 / max(delivered, 1)
    return {
        "cpu_steeple_ms_per_delivery": steeple_s * per,
        "cpu_postgres_ms_per_delivery": postgres_s * per,
        "cpu_total_ms_per_delivery": (steeple_s + postgres_s) * per,
    }


def _database_figures(server: Server, dsn: str, offset: int, counts0: tuple[int, int],
                      delivered: int, conflicts: Counter[str]) -> Figures:  # fmt: skip
    """What the server saw of one run; the run's conflicts are added to ``conflicts``."""
    pgserver.wait_backends_gone(dsn)
    commits, rollbacks = pgserver.transactions(dsn)
    found = server.conflicts_since(offset)
    conflicts.update(found)
    left = pgserver.rows(dsn)
    return {
        "duplicate_runs": left.duplicate_runs,
        "retries": sum(found.values()),
        "transactions_per_delivery": (commits - counts0[0] + rollbacks - counts0[1])
        / max(delivered, 1),
        "replicas_delivering": left.replicas_delivering,
        "busiest_share": left.busiest_share,
    }


def pg_burst_once(
    server: Server,
    workdir: Path,
    *,
    count: int,
    n: int,
    the_sink: Sink,
    conflicts: Counter[str],
    lead_s: float = 12.0,
    timeout_s: float = 300.0,
) -> Figures:
    """The replicas start on the migrated, empty database first; T is then chosen and the
    schedules written (the replicas' planners find them within ``replica_poll_ms``), so
    the lead covers the writes, not the boots. CPU is counted from the last write."""
    the_sink.reset()
    with (
        pgserver.fresh_database(server, f"burst_{count}") as dsn,
        closing(PgDatabase.open(dsn, pool_size=1)) as db,  # migrates the empty database
    ):
        with replicas(workdir, count, dsn) as apps:
            at_ms = (int(time.time() * 1000) // 1000 + int(lead_s) + 1) * 1000
            expected = burst.prepare_store(db, n=n, url=the_sink.url, at_ms=at_ms)
            if time.time() * 1000 > at_ms - 2_500:
                raise RuntimeError(f"setup took too long for --lead {lead_s}: raise it")
            steeple_cpu = _steeple_cpu(apps)
            offset, counts0 = server.log_offset(), pgserver.transactions(dsn)
            urls = [app.base_url for app in apps]
            trips0 = pgserver.round_trips(urls)
            cpu0 = steeple_cpu(), server.cpu_seconds()
            the_sink.wait_distinct(n, timeout=at_ms / 1000 - time.time() + timeout_s)
            cpu = steeple_cpu() - cpu0[0], server.cpu_seconds() - cpu0[1]
            trips = pgserver.round_trips(urls) - trips0
        verdict = judge(the_sink.records(), expected)
        database = _database_figures(server, dsn, offset, counts0, verdict.delivered, conflicts)
        database["round_trips_per_delivery"] = trips / max(verdict.delivered, 1)
    last = max(verdict.first_arrival.values(), default=0) / 1e6
    drained_s = (last - at_ms) / 1000 if verdict.lost == 0 else float("nan")
    return _burst_figures(drained_s, verdict.figures(expected), cpu, verdict.delivered) | database


def _burst_figures(
    drained_s: float, delivered: Figures, cpu: tuple[float, float], count: int
) -> Figures:
    return {
        "drain_per_s": count / drained_s if drained_s > 0 else float("nan"),
        "all_delivered_s": drained_s,
        "lateness_p50_ms": delivered["lateness_p50_ms"],
        "lateness_p99_ms": delivered["lateness_p99_ms"],
        "lost": delivered["lost"],
        "duplicate_deliveries": delivered["duplicates"],
        **_cpu_figures(cpu[0], cpu[1], count),
        "load_1m": os.getloadavg()[0],
    }


def sqlite_burst_once(workdir: Path, *, n: int, the_sink: Sink, lead_s: float,
                      timeout_s: float) -> Figures:  # fmt: skip
    got = burst.burst_once(workdir, n=n, lead_s=lead_s, timeout_s=timeout_s, the_sink=the_sink)
    count = int(got["delivered"])
    return _burst_figures(got["all_delivered_s"], got, (got["cpu_s"], 0.0), count)


def pg_sustained_once(
    server: Server,
    workdir: Path,
    *,
    count: int,
    rate: int,
    seconds: int,
    the_sink: Sink,
    conflicts: Counter[str],
) -> Figures:
    the_sink.reset()
    prepared: list[steady.Prepared] = []
    with pgserver.fresh_database(server, f"sustained_{count}") as dsn:
        _seeded(dsn, lambda db: prepared.append(
            steady.prepare_store(db, rate=rate, url=the_sink.url)))  # fmt: skip
        with replicas(workdir, count, dsn) as apps:
            offset, counts0 = server.log_offset(), pgserver.transactions(dsn)
            meters = {"steeple": _steeple_cpu(apps), "postgres": server.cpu_seconds}
            figures = steady.measure_window(
                meters, the_sink=the_sink, due=steady.due_at_start(prepared[0].schedule_ids),
                rate=rate, duration_s=seconds, warmup_s=3, drain_s=10.0,
            )  # fmt: skip
        delivered = the_sink.count()
        database = _database_figures(server, dsn, offset, counts0, delivered, conflicts)
    return _sustained_figures(figures) | database


def _sustained_figures(figures: Figures) -> Figures:
    steeple_ms = figures.pop("cpu_steeple_ms_per_delivery")
    postgres_ms = figures.pop("cpu_postgres_ms_per_delivery", 0.0)
    return {
        "offered_per_s": figures["offered_per_s"],
        "achieved_per_s": figures["achieved_per_s"],
        "undelivered": figures["undelivered"],
        "duplicate_deliveries": figures["duplicates"],
        "lateness_p50_ms": figures["lateness_p50_ms"],
        "lateness_p99_ms": figures["lateness_p99_ms"],
        "cpu_share_of_2_cores": figures["cpu_share_of_2_cores"],
        "cpu_steeple_ms_per_delivery": steeple_ms,
        "cpu_postgres_ms_per_delivery": postgres_ms,
        "cpu_total_ms_per_delivery": steeple_ms + postgres_ms,
        "load_1m": os.getloadavg()[0],
    }


def sqlite_sustained_once(workdir: Path, *, rate: int, seconds: int, the_sink: Sink) -> Figures:
    got = steady.steady_once(workdir, rate=rate, duration_s=seconds, the_sink=the_sink)
    got["cpu_steeple_ms_per_delivery"] = got.pop("cpu_ms_per_delivery")
    return _sustained_figures(got)


def _show(label: str, figures: Figures) -> Figures:
    shown = ", ".join(f"{k}={v:.4g}" for k, v in figures.items())
    print(f"  {label}: {shown}", flush=True)
    return figures


def _titles(args: argparse.Namespace) -> dict[str, int]:
    """The workloads asked for, by title (a 0 size or rate skips one)."""
    wanted = {
        f"burst {args.burst}": args.burst,
        f"sustained {args.sustained_rate}/s for {args.seconds} s": args.sustained_rate,
    }
    return {title: size for title, size in wanted.items() if size}


def _one_arm(args: argparse.Namespace, count: int, server: Server, work: Path, the_sink: Sink,
             conflicts: Counter[str]) -> dict[str, Figures]:  # fmt: skip
    """One run of each workload on one arm (``count`` 0: SQLite), by title."""
    got: dict[str, Figures] = {}
    if args.burst:
        got[f"burst {args.burst}"] = (
            sqlite_burst_once(work, n=args.burst, the_sink=the_sink, lead_s=args.lead,
                              timeout_s=args.timeout)
            if count == 0
            else pg_burst_once(server, work, count=count, n=args.burst, the_sink=the_sink,
                               conflicts=conflicts, lead_s=args.lead, timeout_s=args.timeout)
        )  # fmt: skip
    if args.sustained_rate:
        got[f"sustained {args.sustained_rate}/s for {args.seconds} s"] = (
            sqlite_sustained_once(work, rate=args.sustained_rate, seconds=args.seconds,
                                  the_sink=the_sink)
            if count == 0
            else pg_sustained_once(server, work, count=count, rate=args.sustained_rate,
                                   seconds=args.seconds, the_sink=the_sink, conflicts=conflicts)
        )  # fmt: skip
    return got


def _publish(args: argparse.Namespace, arms: list[str], groups: dict[str, list[Figures]],
             conflicts: dict[str, Counter[str]]) -> None:  # fmt: skip
    compare = {
        title: [f"{title}: {arm}" for arm in arms if f"{title}: {arm}" in groups]
        for title in _titles(args)
    }
    params = {"replicas": args.replicas, "burst": args.burst, "runs": args.runs,
              "sustained_rate": args.sustained_rate, "seconds": args.seconds,
              "lead_s": args.lead,
              "pg_cpus": ",".join(map(str, sorted(args.pg_cpus or [])))}  # fmt: skip
    retried = {arm: dict(c.most_common()) for arm, c in conflicts.items() if c}
    publish("replicas", params, groups, extra={"conflicts_by_statement": retried},
            compare=compare)  # fmt: skip
    for arm, found in retried.items():
        print(f"\nretried statements, {arm} (all runs):")
        for statement, times in list(found.items())[:5]:
            print(f"  {times:>6}  {statement}")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2,3", help="comma-separated replica counts")
    parser.add_argument("--burst", type=int, default=2_000, help="occurrences (0: skip)")
    parser.add_argument("--sustained-rate", type=int, default=200, help="per s (0: skip)")
    parser.add_argument("--seconds", type=int, default=20, help="the sustained window")
    parser.add_argument("--lead", type=float, default=12.0, help="seconds until the burst")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--pg-cpus", type=replica_scaling.cpu_list,
                        help="pin PostgreSQL to these CPUs (as taskset -c: 0)")  # fmt: skip
    args = parser.parse_args()
    counts = [int(r) for r in args.replicas.split(",") if r]
    arms = [SQLITE, *map(arm_name, counts)]
    groups: dict[str, list[Figures]] = {}
    conflicts: dict[str, Counter[str]] = {arm: Counter() for arm in arms}
    with (
        tempfile.TemporaryDirectory(dir=args.workdir) as tmp,
        sink() as the_sink,
        pgserver.running(Path(tmp)) as server,
    ):
        replica_scaling.pin_server(server, args.pg_cpus)
        try:
            # Run i of every arm before run i + 1 of any: on a shared machine the arms
            # meet the same load.
            for i in range(args.runs):
                print(f"run {i + 1}/{args.runs}", flush=True)
                for arm, count in zip(arms, [0, *counts], strict=True):
                    got = _one_arm(args, count, server, Path(tmp), the_sink, conflicts[arm])
                    for title, figures in got.items():
                        groups.setdefault(f"{title}: {arm}", []).append(
                            _show(f"{title}: {arm}", figures)
                        )
        finally:  # a run that fails keeps the runs before it
            if groups:
                groups.update(
                    replica_scaling.groups_for(
                        args.burst, counts, groups, arm_name, pg_cpus=args.pg_cpus
                    )
                )
                _publish(args, arms, groups, conflicts)


if __name__ == "__main__":
    main()
