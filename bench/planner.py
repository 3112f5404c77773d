"""planner: N active schedules (mixed expressions and timezones) → occurrences materialised
per second and time to plan one minute of work. In-process, no HTTP.

Setup (not measured): a template database with N schedules written in bulk
(:func:`bench.seed.bulk_schedules`, 8 expressions × 5 zones, cursors = first occurrence
after T0), copied fresh for every run. Measured: the planner service's own loop, simulated
with a fixed clock — for each second t in [T0, T0 + 60 s): ``plan_once(now=t)`` with the
default :class:`PlannerConfig` (2 s lookahead, 500 schedules per pass), repeated while a
pass reports ``more``; each pass is one durable write transaction (``Database.write_now``,
WAL + synchronous=FULL), exactly as the service runs it.

``python -m bench.planner [--sizes 100000,1000000] [--runs 3] [--batch 500]``

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
from appliance.store.database import Database
from appliance.store.plan_pass import PlannerConfig, plan_once
from bench import seed
from bench.report import Figures, base_parser, publish, repeat

MINUTE_S = 60


def build_template(path: Path, *, n: int, now: int) -> None:
    db = Database.open(path)
    tenants = [seed.new_tenant(db, name=f"t{i}", now=now).tenant_id for i in range(10)]
    db.close()
    conn = seed.bulk_connection(path)
    pairs = [(c, z) for c in seed.MIXED_CRONS for z in seed.MIXED_ZONES]
    seed.bulk_schedules(conn, tenant_ids=tenants, crons=pairs, n=n,
                        target_url="http://127.0.0.1:9/hook", now=now)  # fmt: skip
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def plan_minute(path: Path, *, start_ms: int, config: PlannerConfig) -> Figures:
    db = Database.open(path)
    occurrences = OccurrenceCache()  # kept across passes, as the Planner service keeps it
    materialised = passes = 0
    began = time.perf_counter()
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
    elapsed = time.perf_counter() - began
    return {
        "minute_planned_s": elapsed,
        "occurrences": materialised,
        "occurrences_per_s": materialised / elapsed,
        "passes": passes,
        "ms_per_pass": 1000 * elapsed / passes,
    }


def planner_runs(
    workdir: Path, *, n: int, runs: int, config: PlannerConfig | None = None
) -> list[Figures]:
    config = config or PlannerConfig()
    now = int(time.time() * 1000)
    start_ms = now - now % 1000 + 1000
    template = workdir / f"template-{n}.db"
    began = time.perf_counter()
    build_template(template, n=n, now=start_ms - 1)
    print(f"  template of {n} schedules built in {time.perf_counter() - began:.1f} s", flush=True)

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
    args = parser.parse_args()
    config = dataclasses.replace(PlannerConfig(), batch=args.batch)
    groups = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for n in [int(s) for s in args.sizes.split(",") if s]:
            print(f"planner with {n} schedules", flush=True)
            groups[f"planner {n} schedules"] = planner_runs(
                Path(tmp), n=n, runs=args.runs, config=config
            )
    publish("planner", {"sizes": args.sizes, "config": repr(config)}, groups)


if __name__ == "__main__":
    main()
