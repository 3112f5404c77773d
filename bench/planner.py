"""planner: N active schedules (mixed expressions and timezones) → occurrences materialised
per second and time to plan one minute of work. In-process, no HTTP.

Setup (not measured): a template database with N schedules written in bulk
(:func:`bench.seed.bulk_timed_schedules`, cursors = first occurrence after T0), copied
fresh for every run. The mix (``--mix``): ``cron`` (the default) is 8 expressions × 5
zones, round-robin; ``kinds`` is every schedule kind (:func:`bench.seed.kinds_mix`): per
20 schedules 8 cron as above, 5 intervals (every 1–3600 s, log-uniform, anchored before
T0), 3 one-offs (``at`` in [T0, T0 + 180 s)) and 4 bounded cron or interval schedules
whose ``start_at``/``end_at`` cut inside the minute.

Measured: the planner service's own loop, simulated with a fixed clock — for each second
t in [T0, T0 + 60 s): ``plan_once(now=t)`` with the default :class:`PlannerConfig` (2 s
lookahead, 500 schedules per pass), repeated while a pass reports ``more``; each pass is
one durable write transaction (``Database.write_now``, WAL + synchronous=FULL), exactly as
the service runs it.

``python -m bench.planner [--sizes 100000,1000000] [--mix cron,kinds] [--runs 3] [--batch 500]``

``--batch`` changes only ``PlannerConfig.batch`` (schedules per pass, hence per durable
transaction), to measure what the pass size costs; figures for the appliance's behaviour
use the default.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from pathlib import Path

from appliance.core.occurrence_cache import OccurrenceCache
from appliance.store.infra.database import Database
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from bench import seed
from bench.report import Figures, base_parser, publish, repeat

MINUTE_S = 60
MIXES = ("cron", "kinds")


def mix_timings(mix: str, *, n: int, t0: int) -> list[seed.BulkTiming]:
    """The timings the schedules take round-robin (``t0``: the minute's first second)."""
    if mix == "kinds":
        return seed.kinds_mix(n, t0=t0)
    return [seed.BulkTiming(cron=c, timezone=z) for c in seed.MIXED_CRONS for z in seed.MIXED_ZONES]


def build_template(path: Path, *, n: int, now: int, mix: str = "cron") -> None:
    """``n`` schedules of ``mix`` whose cursors are their first occurrences after ``now``
    (the minute planned starts at ``now + 1``)."""
    db = Database.open(path)
    tenants = [seed.new_tenant(db, name=f"t{i}", now=now).tenant_id for i in range(10)]
    db.close()
    conn = seed.bulk_connection(path)
    seed.bulk_timed_schedules(conn, tenant_ids=tenants, timings=mix_timings(mix, n=n, t0=now + 1),
                              n=n, target_url="http://127.0.0.1:9/hook", now=now)  # fmt: skip
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def plan_minute(path: Path, *, start_ms: int, config: PlannerConfig) -> Figures:
    db = Database.open(path)
    occurrences = OccurrenceCache()  # kept across passes, as the Planner service keeps it
    materialised = passes = 0
    began, cpu_began = time.perf_counter(), time.process_time()
    try:
        for second in range(MINUTE_S):
            now = start_ms + second * 1000
            while True:
                result = db.write_now(plan_once, now=now, config=config, occurrences=occurrences)
                materialised += result.materialised
                passes += 1
                if not result.more:
                    break
    finally:
        db.close()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    return {
        "minute_planned_s": elapsed,
        "occurrences": materialised,
        "occurrences_per_s": materialised / elapsed,
        "passes": passes,
        "ms_per_pass": 1000 * elapsed / passes,
        # CPU of this process (SQLite included; not the fsync waits): on a shared machine
        # it moves less with the load than the wall figures do.
        "cpu_s": cpu,
        "cpu_us_per_occurrence": 1e6 * cpu / materialised if materialised else 0.0,
    }


def planner_runs(
    workdir: Path, *, n: int, runs: int, config: PlannerConfig | None = None, mix: str = "cron"
) -> list[Figures]:
    config = config or PlannerConfig()
    now = int(time.time() * 1000)
    start_ms = now - now % 1000 + 1000
    template = workdir / f"template-{n}.db"
    began = time.perf_counter()
    build_template(template, n=n, now=start_ms - 1, mix=mix)
    print(
        f"  template of {n} schedules ({mix} mix) built in {time.perf_counter() - began:.1f} s",
        flush=True,
    )

    def one(i: int) -> Figures:
        copy = workdir / f"run-{n}-{i}.db"
        shutil.copyfile(template, copy)
        try:
            return plan_minute(copy, start_ms=start_ms, config=config)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(str(copy) + suffix).unlink(missing_ok=True)

    try:
        return repeat(runs, one)
    finally:
        template.unlink(missing_ok=True)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--batch", type=int, default=PlannerConfig().batch)
    parser.add_argument("--mix", default="cron", help="cron, kinds or both (cron,kinds)")
    args = parser.parse_args()
    mixes = [m for m in args.mix.split(",") if m]
    if not mixes or any(m not in MIXES for m in mixes):
        parser.error(f"--mix: a comma-separated list of {', '.join(MIXES)}")
    config = dataclasses.replace(PlannerConfig(), batch=args.batch)
    groups = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for mix in mixes:
            for n in [int(s) for s in args.sizes.split(",") if s]:
                print(f"planner with {n} schedules, {mix} mix", flush=True)
                # The cron mix keeps its group's name, so results compare across commits.
                group = f"planner {n} schedules" + ("" if mix == "cron" else f", {mix} mix")
                groups[group] = planner_runs(Path(tmp), n=n, runs=args.runs, config=config, mix=mix)
    params = {"sizes": args.sizes, "mix": args.mix, "config": repr(config)}
    publish("planner", params, groups)


if __name__ == "__main__":
    main()
