"""events: ``GET /v1/events`` latency with N events stored, plain and filtered.

Setup (not measured): 10 tenants, N events written in bulk, round-robin over the tenants,
types mixed as a busy appliance writes them (98 % run outcomes of which 1 % failed, the
rest schedule changes; one system clock event per 100k), each on one of 1,000 schedules
of its tenant. Measured against a running appliance, one keep-alive connection,
sequential requests of the first tenant: ``GET /v1/events?after=<random seq>&limit=50``
(``feed``), the same with ``type=schedule.run.failed`` (``failed``, a 1 % type) and with a
``schedule_id`` (``schedule``). Latency is client-observed wall time; ``*_cpu_ms`` is the
appliance's CPU per request (all threads).

``python -m bench.events [--events 10000000] [--requests 500] [--runs 3] [--data-dir DIR]``
"""

from __future__ import annotations

import contextlib
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from appliance.core.events import EventType
from appliance.core.ids import new_id
from bench import seed
from bench.report import Figures, base_parser, percentile, publish, repeat
from bench.scale import Client, _serving, measure

TENANTS = 10
SCHEDULES_PER_TENANT = 1000
_SQL = (
    "INSERT INTO events (id, tenant_id, type, schedule_id, run_id, occurred_at, data)"
    " VALUES (?, ?, ?, ?, NULL, ?, ?)"
)


def _type(n: int) -> tuple[str, str]:
    """The tenant-less ``system`` marker or a type, for the n-th event."""
    if n % 100_000 == 99_999:
        return "system", str(EventType.CLOCK_JUMP_DETECTED)
    if n % 100 == 0:
        return "", str(EventType.SCHEDULE_UPDATED)
    if n % 100 == 1:
        return "", str(EventType.RUN_FAILED)
    return "", str(EventType.RUN_SUCCEEDED)


def build(data_dir: Path, *, events: int) -> dict[str, object]:
    now = int(time.time() * 1000)
    db = seed.open_store(data_dir)
    tenants = [seed.new_tenant(db, name=f"t{i}", now=now) for i in range(TENANTS)]
    db.close()
    conn = seed.bulk_connection(seed.db_path(data_dir))
    data = json.dumps({"scheduled_for": "2026-01-01T00:00:00Z", "attempt": 1})
    schedules = [
        [f"sch_{t:02d}{s:024d}" for s in range(SCHEDULES_PER_TENANT)] for t in range(TENANTS)
    ]
    began = time.perf_counter()
    batch: list[tuple[object, ...]] = []
    for n in range(events):
        marker, type_ = _type(n)
        tenant = n % TENANTS
        tenant_id = "system" if marker else tenants[tenant].tenant_id
        schedule = None if marker else schedules[tenant][(n // TENANTS) % SCHEDULES_PER_TENANT]
        batch.append((new_id("evt", now), tenant_id, type_, schedule, now, data))
        if len(batch) == 50_000:
            with conn:
                conn.executemany(_SQL, batch)
            batch.clear()
    with conn:
        conn.executemany(_SQL, batch)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    print(f"  built {events} events in {time.perf_counter() - began:.0f} s", flush=True)
    return {"api_key": tenants[0].api_key, "events": events, "schedules": schedules[0]}


def events_once(data_dir: Path, built: dict[str, object], *, requests: int, seed_: int) -> Figures:
    rng = random.Random(seed_)
    top = int(str(built["events"]))
    schedules = built["schedules"]
    assert isinstance(schedules, list)
    with _serving(data_dir, ()) as app:
        client = Client(app.base_url, str(built["api_key"]))

        def after() -> int:
            return rng.randrange(top)

        paths: dict[str, Callable[[], str]] = {
            "feed": lambda: f"/v1/events?after={after()}&limit=50",
            "failed": lambda: f"/v1/events?after={after()}&limit=50&type=schedule.run.failed",
            "schedule": lambda: f"/v1/events?after={after()}&schedule_id={rng.choice(schedules)}",
        }
        timings = {
            name: measure(client, path, requests, pid=app.pid) for name, path in paths.items()
        }
        client.conn.close()
    figures: Figures = {}
    for name, (values, cpu_ms) in timings.items():
        figures[f"{name}_p50_ms"] = percentile(values, 50)
        figures[f"{name}_p99_ms"] = percentile(values, 99)
        figures[f"{name}_cpu_ms"] = cpu_ms
    return figures


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--requests", type=int, default=500, help="per kind per run")
    parser.add_argument("--data-dir", type=Path, help="keep the seeded data here and reuse it")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        root = args.data_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(dir=args.workdir))
        )
        record = root / "built.json"
        if record.exists() and json.loads(record.read_text())["events"] == args.events:
            built = json.loads(record.read_text())
        else:
            print(f"building {args.events} events", flush=True)
            built = build(root / "data", events=args.events)
            record.write_text(json.dumps(built))
        runs = repeat(
            args.runs,
            lambda i: events_once(root / "data", built, requests=args.requests, seed_=i),
        )
    publish("events", {"events": args.events, "requests": args.requests}, {"events": runs})


if __name__ == "__main__":
    main()
