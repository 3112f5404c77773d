"""recovery: SIGKILL with P due runs pending → time from restart to the first and to the
last delivery.

Setup (not measured): P pending runs, due in the seconds just before now, spread over
P/100 schedules whose own expression fires only once a year (so the planner adds
nothing); rows written with the store's ``insert_runs`` (real ids and keys). The appliance
starts, delivers until the sink has ``--kill-after`` deliveries (so some runs are
``running`` under leases), and is SIGKILLed. Measured from the restart (just before the
new process is spawned): ``listening_s`` (the process serves the API),
``first_delivery_s`` (first arrival at the sink after the restart), ``last_delivery_s``
(the moment every pending key has arrived at least once). Duplicates are the runs in
flight at the kill that were delivered again after the reclaim (at-least-once).

``python -m bench.recovery [--size 100000] [--runs 3] [--timeout 900]``
"""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path

from bench import seed
from bench.deliveries import judge, parse_scheduled_for
from bench.processes import Appliance, Sink, sink
from bench.report import Figures, base_parser, publish, repeat

PER_SCHEDULE = 100
YEARLY = "0 0 1 1 *"


def prepare(data_dir: Path, *, size: int, url: str) -> dict[str, int]:
    db = seed.open_store(data_dir)
    try:
        now = int(time.time() * 1000)
        tenant = seed.new_tenant(db, name="bench", now=now)
        count = max(1, size // PER_SCHEDULE)
        specs = [seed.spec(target_url=url, cron=YEARLY, name=f"r{i}") for i in range(count)]
        ids = seed.create_schedules(db, tenant_id=tenant.tenant_id, specs=specs, now=now)
        per = min(PER_SCHEDULE, size)
        rows = seed.pending_runs(db, tenant_id=tenant.tenant_id, schedule_ids=ids,
                                 per_schedule=per, now=now)  # fmt: skip
    finally:
        db.close()
    return {r.key: parse_scheduled_for(r.scheduled_for) for r in rows}


def recovery_once(
    workdir: Path, *, size: int, kill_after: int, timeout_s: float, the_sink: Sink
) -> Figures:
    data_dir = Path(tempfile.mkdtemp(prefix="recovery-", dir=workdir))
    the_sink.reset()
    expected = prepare(data_dir, size=size, url=the_sink.url)
    first = Appliance(data_dir).start()
    try:
        the_sink.wait_count(min(kill_after, len(expected) // 2), timeout=timeout_s, poll=0.01)
    finally:
        first.stop(signal.SIGKILL)
    before_kill = the_sink.count()
    second = Appliance(data_dir)
    try:
        second.start()
        restarted_ns = int(second.started_at * 1e9)
        listening_s = time.time() - second.started_at
        the_sink.wait_distinct(len(expected), timeout=timeout_s, poll=0.02)
    finally:
        second.stop()
    arrivals = the_sink.records()
    after = [a.at_ns for a in arrivals if a.at_ns >= restarted_ns]
    verdict = judge(arrivals, expected)
    last_ns = max(verdict.first_arrival.values(), default=restarted_ns)
    return {
        "pending": len(expected),
        "delivered_before_kill": before_kill,
        "listening_s": listening_s,
        "first_delivery_s": (min(after) - restarted_ns) / 1e9 if after else float("nan"),
        "last_delivery_s": (last_ns - restarted_ns) / 1e9 if verdict.lost == 0 else float("nan"),
        "lost": verdict.lost,
        "duplicates": verdict.duplicates,
        "rate_after_restart_per_s": len(after) / max((last_ns - restarted_ns) / 1e9, 1e-9),
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--kill-after", type=int, default=200, help="deliveries before SIGKILL")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp, sink() as the_sink:
        runs = repeat(args.runs, lambda _i: recovery_once(
            Path(tmp), size=args.size, kill_after=args.kill_after, timeout_s=args.timeout,
            the_sink=the_sink))  # fmt: skip
    publish("recovery", {"size": args.size, "kill_after": args.kill_after},
            {f"recovery {args.size} pending": runs})  # fmt: skip


if __name__ == "__main__":
    main()
