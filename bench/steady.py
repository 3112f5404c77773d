"""steady: R occurrences/s for D seconds → achieved rate, lateness percentiles, CPU per
delivery; and the highest rate sustained (``--find-max``).

Setup (not measured): R schedules ``* * * * * *`` (every second) through the store. The
window is D whole seconds starting a few seconds after the appliance listens; expected =
every (schedule, second) in the window. After the window the sink gets ``--drain`` more
seconds, then the appliance is stopped. Figures, all from the sink:
- ``achieved_per_s`` = window occurrences delivered / (their last first-arrival − window
  start), i.e. the delivery rate actually reached for the offered load;
- ``undelivered`` = window occurrences not delivered by the end of the drain (late, not
  necessarily lost: a backlog the appliance had not worked off);
- lateness percentiles over delivered window occurrences; ``cpu_ms_per_delivery`` = the
  appliance's CPU over window + drain / deliveries in that time.
A rate counts as *sustained* when nothing is undelivered and lateness p99 ≤ 1 s.

``--spread``: the schedules get ``jitter_seconds = 1``, so each second's occurrences are
due spread over that second (ADR 0037's deterministic jitter) instead of all at its
start — the same rate as a uniform stream rather than one burst per second. Lateness is
then first arrival − ``due_at`` (``scheduled_for`` + the jitter, computed here with the
appliance's own function): how late the scheduler fired, not how long the jitter was.

``--sse-clients 0,100``: the same load with that many live event streams attached (each
receives one message per delivery), side by side; compare ``cpu_ms_per_delivery``.

``python -m bench.steady [--rates 500,2000] [--duration 60] [--runs 3] [--find-max]
[--spread] [--sse-clients 0,100]``
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from appliance.core.ids import idempotency_key
from appliance.core.instants import format_scheduled_for
from appliance.core.jitter import jitter_ms
from appliance.store.infra.backend import Store
from bench import seed, streams
from bench.deliveries import judge
from bench.processes import Appliance, Sink, cpu_seconds, sink
from bench.report import Figures, base_parser, publish, repeat

SUSTAINED_P99_MS = 1000.0


class Prepared(NamedTuple):
    schedule_ids: list[str]
    api_key: str


def prepare(data_dir: Path, *, rate: int, url: str, jitter_seconds: int = 0) -> Prepared:
    db = seed.open_store(data_dir)
    try:
        return prepare_store(db, rate=rate, url=url, jitter_seconds=jitter_seconds)
    finally:
        db.close()


def prepare_store(db: Store, *, rate: int, url: str, jitter_seconds: int = 0) -> Prepared:
    """``rate`` schedules firing every second, in an open store (SQLite or PostgreSQL)."""
    now = int(time.time() * 1000)
    tenant = seed.new_tenant(db, name="bench", now=now)
    specs = [
        seed.spec(target_url=url, cron="* * * * * *", name=f"s{i}", jitter_seconds=jitter_seconds)
        for i in range(rate)
    ]
    ids = seed.create_schedules(db, tenant_id=tenant.tenant_id, specs=specs, now=now)
    return Prepared(schedule_ids=ids, api_key=tenant.api_key)


Due = Callable[[int], list[tuple[str, int]]]
"""A second (epoch ms) → (idempotency key, due_at ms) of every occurrence scheduled then."""


def due_at_start(ids: list[str]) -> Due:
    def due(second_ms: int) -> list[tuple[str, int]]:
        text = format_scheduled_for(second_ms)
        return [(idempotency_key(sid, text), second_ms) for sid in ids]

    return due


def due_jittered(ids: list[str], jitter_seconds: int) -> Due:
    def due(second_ms: int) -> list[tuple[str, int]]:
        text = format_scheduled_for(second_ms)
        return [
            (
                idempotency_key(sid, text),
                second_ms + jitter_ms(sid, second_ms, jitter_seconds, 1000),
            )
            for sid in ids
        ]

    return due


def _sleep_until(epoch_s: float) -> None:
    delay = epoch_s - time.time()
    if delay > 0:
        time.sleep(delay)


def steady_once(
    workdir: Path,
    *,
    rate: int,
    duration_s: int,
    the_sink: Sink,
    warmup_s: int = 3,
    drain_s: float = 10.0,
    spread: bool = False,
    sse_clients: int = 0,
    env: Mapping[str, str] | None = None,
) -> Figures:
    """``sse_clients``: live event streams attached for the whole window (each delivery
    writes an event, so each stream receives one message per delivery). ``env``: settings
    for the appliance's process (``STEEPLE_…``, docs/configuration.md)."""
    data_dir = Path(tempfile.mkdtemp(prefix="steady-", dir=workdir))
    the_sink.reset()
    jitter = 1 if spread else 0
    ids, api_key = prepare(data_dir, rate=rate, url=the_sink.url, jitter_seconds=jitter)
    app = Appliance(data_dir, env=dict(env or {})).start()
    try:
        with streams.attached(
            app.base_url, api_key, sse_clients, db_path=seed.db_path(data_dir)
        ) as attached:
            figures = measure_window(
                process_meters(app.pid),
                the_sink=the_sink,
                due=due_jittered(ids, jitter) if spread else due_at_start(ids),
                rate=rate,
                duration_s=duration_s,
                warmup_s=warmup_s,
                drain_s=drain_s,
            )
            figures["sse_clients"] = sse_clients
            figures["sse_events_per_client"] = attached.events / max(sse_clients, 1)
            return figures
    finally:
        app.stop()


Meters = Mapping[str, Callable[[], float]]
"""CPU seconds so far, by name: ``""`` names the scheduler (``cpu_ms_per_delivery``),
any other ``x`` a process it needs (``cpu_x_ms_per_delivery``, e.g. a database server)."""


def process_meters(pid: int) -> Meters:
    """The scheduler is one process."""
    return {"": lambda: cpu_seconds(pid)}


def measure_window(
    meters: Meters,
    *,
    the_sink: Sink,
    due: Due,
    rate: int,
    duration_s: int,
    warmup_s: int,
    drain_s: float,
) -> Figures:
    """Measure a started scheduler (its CPU read by ``meters``) over a window of
    ``duration_s`` whole seconds starting ``warmup_s`` from now; ``due(second_ms)`` lists
    the occurrences scheduled at one second with the instant each is due (lateness is
    measured from it). ``cpu_share_of_2_cores`` sums every meter."""
    start = int(time.time()) + warmup_s
    _sleep_until(start)
    cpu0, count0 = {k: read() for k, read in meters.items()}, the_sink.count()
    _sleep_until(start + duration_s)
    expected = {}
    for second in range(start, start + duration_s):
        for key, due_ms in due(second * 1000):
            expected[key] = due_ms
    deadline = start + duration_s + drain_s
    while time.time() < deadline:
        if judge(the_sink.records(), expected).lost == 0:
            break
        time.sleep(1.0)
    cpu = {k: read() - cpu0[k] for k, read in meters.items()}
    count1, ended = the_sink.count(), time.time()
    verdict = judge(the_sink.records(), expected)
    figures = verdict.figures(expected)
    last_ns = max(verdict.first_arrival.values(), default=start * 10**9)
    elapsed = max(last_ns / 1e9 - start, duration_s)
    return {
        "offered_per_s": rate,
        "achieved_per_s": verdict.delivered / elapsed,
        "sink_rate_per_s": (count1 - count0) / (ended - start),  # any occurrence, backlog too
        "undelivered": figures.pop("lost"),
        **figures,
        **{
            f"cpu_{k}_ms_per_delivery" if k else "cpu_ms_per_delivery": 1000
            * seconds
            / max(count1 - count0, 1)
            for k, seconds in cpu.items()
        },
        "cpu_share_of_2_cores": sum(cpu.values()) / elapsed / 2,
    }


def sustained(figures: Figures) -> bool:
    return figures["undelivered"] == 0 and figures["lateness_p99_ms"] <= SUSTAINED_P99_MS


def find_max(
    workdir: Path, *, start: int, factor: float, limit: int, duration_s: int, the_sink: Sink
) -> tuple[int, list[Figures]]:
    """Step the rate up by ``factor`` from ``start`` until it is not sustained (at most
    ``limit`` steps); the highest sustained rate (0 if none) and every step's figures."""
    best, steps, rate = 0, [], start
    for _ in range(limit):
        figures = steady_once(workdir, rate=rate, duration_s=duration_s, the_sink=the_sink)
        steps.append(figures)
        print(f"  find-max {rate}/s: sustained={sustained(figures)} "
              f"achieved={figures['achieved_per_s']:.0f}/s p99={figures['lateness_p99_ms']:.0f} ms",
              flush=True)  # fmt: skip
        if not sustained(figures):
            break
        best, rate = rate, int(rate * factor)
    return best, steps


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rates", default="500,2000", help="comma-separated occurrences/s")
    parser.add_argument("--duration", type=int, default=60, help="window seconds")
    parser.add_argument("--find-max", action="store_true")
    parser.add_argument("--spread", action="store_true", help="due spread over each second")
    parser.add_argument("--max-from", type=int, default=50)
    parser.add_argument("--max-factor", type=float, default=1.5)
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--max-duration", type=int, default=20, help="window s per step")
    parser.add_argument(
        "--sse-clients",
        default="0",
        help="comma-separated counts of live event streams attached (e.g. 0,100: side by side)",
    )
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",") if r]
    clients = [int(c) for c in args.sse_clients.split(",") if c]
    groups: dict[str, list[Figures]] = {}
    extra: dict[str, object] = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp, sink() as the_sink:
        work = Path(tmp)
        # Run i of every (rate, streams) pair before run i + 1 of any: on a shared machine
        # the arms compared meet the same load. A label met twice adds runs to its group.
        for i in range(args.runs):
            for rate in rates:
                for n in clients:
                    label = f"steady {rate}/s for {args.duration} s" + (
                        " spread" if args.spread else ""
                    )
                    label += f", {n} event streams" if n else ""
                    print(f"{label}: run {i + 1}/{args.runs}", flush=True)
                    groups.setdefault(label, []).extend(
                        repeat(
                            1,
                            lambda _i, r=rate, n=n: steady_once(  # type: ignore[misc]
                                work,
                                rate=r,
                                duration_s=args.duration,
                                the_sink=the_sink,
                                spread=args.spread,
                                sse_clients=n,
                            ),
                        )
                    )
        if args.find_max:
            best, steps = find_max(work, start=args.max_from, factor=args.max_factor,
                                   limit=args.max_steps, duration_s=args.max_duration,
                                   the_sink=the_sink)  # fmt: skip
            extra = {"highest_sustained_per_s": best, "find_max_steps": steps}
            print(f"highest sustained rate: {best}/s")
    config = {
        "rates": args.rates,
        "duration_s": args.duration,
        "spread": args.spread,
        "sse_clients": args.sse_clients,
    }
    publish("steady", config, groups, extra=extra)


if __name__ == "__main__":
    main()
