"""peer: the burst and steady workloads against Steeple and APScheduler 3.11, side by
side in one run, with the ratio.

APScheduler runs in its own process (:mod:`bench.apscheduler_runner`: AsyncIOScheduler,
SQLAlchemyJobStore on SQLite, httpx POST jobs) against the same sink, measured the same
way (sink records, /proc CPU). Setup of either system is not measured. Ratios are
Steeple ÷ APScheduler for rates and APScheduler ÷ Steeple for times (> 1: Steeple better).

``python -m bench.peer [--size 10000] [--rates 500] [--duration 60] [--runs 3]``
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from appliance.core.instants import format_scheduled_for
from bench.burst import burst_once
from bench.deliveries import judge
from bench.processes import Sink, cpu_seconds, sink
from bench.report import Figures, base_parser, publish, repeat
from bench.steady import measure_window, process_meters, steady_once


class Peer:
    """A running :mod:`bench.apscheduler_runner` process."""

    def __init__(self, workdir: Path, *, url: str, jobs: int, trigger: list[str]) -> None:
        db = Path(tempfile.mkdtemp(prefix="peer-", dir=workdir)) / "jobs.sqlite"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.apscheduler_runner",
                "--db",
                str(db),
                "--url",
                url,
                "--jobs",
                str(jobs),
                *trigger,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the APScheduler runner did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def peer_burst_once(
    workdir: Path, *, n: int, lead_s: float, timeout_s: float, the_sink: Sink
) -> Figures:
    the_sink.reset()
    at = int(time.time() + lead_s) + 1
    peer = Peer(workdir, url=the_sink.url, jobs=n, trigger=["--at", str(at)])
    try:
        peer.wait_ready()
        if time.time() > at - 1:
            raise RuntimeError(f"APScheduler setup of {n} jobs outlasted --peer-lead {lead_s}")
        cpu0 = cpu_seconds(peer.proc.pid)
        the_sink.wait_distinct(n, timeout=at - time.time() + timeout_s)
        cpu = cpu_seconds(peer.proc.pid) - cpu0
    finally:
        peer.stop()
    text = format_scheduled_for(at * 1000)
    expected = {f"j{i}@{text}": at * 1000 for i in range(n)}
    verdict = judge(the_sink.records(), expected)
    last = max(verdict.first_arrival.values(), default=0) / 1e6
    return {
        "all_delivered_s": (last - at * 1000) / 1000 if verdict.lost == 0 else float("nan"),
        **verdict.figures(expected),
        "cpu_s": cpu,
        "cpu_ms_per_delivery": 1000 * cpu / max(verdict.delivered, 1),
    }


def peer_steady_once(workdir: Path, *, rate: int, duration_s: int, the_sink: Sink) -> Figures:
    the_sink.reset()
    peer = Peer(workdir, url=the_sink.url, jobs=rate, trigger=["--every-second"])
    try:
        peer.wait_ready()
        return measure_window(
            process_meters(peer.proc.pid),
            the_sink=the_sink,
            due=lambda ms: [(f"j{i}@{format_scheduled_for(ms)}", ms) for i in range(rate)],
            rate=rate,
            duration_s=duration_s,
            warmup_s=3,
            drain_s=10.0,
        )
    finally:
        peer.stop()


def ratios(
    steeple: list[Figures],
    peer: list[Figures],
    *,
    higher_better: list[str],
    lower_better: list[str],
) -> list[Figures]:
    """Per run pair: Steeple's advantage (> 1 means Steeple is better)."""
    out = []
    for s, p in zip(steeple, peer, strict=True):
        row: Figures = {}
        for k in higher_better:
            row[f"{k}_ratio"] = s[k] / p[k] if p[k] else float("inf")
        for k in lower_better:
            row[f"{k}_ratio"] = p[k] / s[k] if s[k] else float("inf")
        out.append(row)
    return out


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="burst size (0: skip)")
    parser.add_argument("--rates", default="500", help="steady rates (empty: skip)")
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--lead", type=float, default=12.0, help="Steeple burst lead (s)")
    parser.add_argument("--peer-lead", type=float, help="APScheduler burst lead (s)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    peer_lead = args.peer_lead or 10 + args.size / 300
    groups: dict[str, list[Figures]] = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp, sink() as the_sink:
        work = Path(tmp)
        if args.size:
            s_runs: list[Figures] = []
            p_runs: list[Figures] = []

            def both(_i: int) -> Figures:
                s_runs.append(
                    burst_once(
                        work,
                        n=args.size,
                        lead_s=args.lead,
                        timeout_s=args.timeout,
                        the_sink=the_sink,
                    )
                )
                p_runs.append(
                    peer_burst_once(
                        work,
                        n=args.size,
                        lead_s=peer_lead,
                        timeout_s=args.timeout,
                        the_sink=the_sink,
                    )
                )
                return {
                    "steeple_s": s_runs[-1]["all_delivered_s"],
                    "apscheduler_s": p_runs[-1]["all_delivered_s"],
                }

            repeat(args.runs, both)
            groups[f"burst {args.size}: steeple"] = s_runs
            groups[f"burst {args.size}: apscheduler"] = p_runs
            groups[f"burst {args.size}: ratio"] = ratios(
                s_runs,
                p_runs,
                higher_better=[],
                lower_better=["all_delivered_s", "lateness_p99_ms", "cpu_ms_per_delivery"],
            )
        for rate in [int(r) for r in args.rates.split(",") if r]:
            s_runs, p_runs = [], []
            for i in range(args.runs):
                s_runs.append(
                    steady_once(work, rate=rate, duration_s=args.duration, the_sink=the_sink)
                )
                p_runs.append(
                    peer_steady_once(work, rate=rate, duration_s=args.duration, the_sink=the_sink)
                )
                print(
                    f"  steady {rate}/s run {i + 1}: steeple "
                    f"{s_runs[-1]['achieved_per_s']:.0f}/s, apscheduler "
                    f"{p_runs[-1]['achieved_per_s']:.0f}/s",
                    flush=True,
                )
            groups[f"steady {rate}/s: steeple"] = s_runs
            groups[f"steady {rate}/s: apscheduler"] = p_runs
            groups[f"steady {rate}/s: ratio"] = ratios(
                s_runs,
                p_runs,
                higher_better=["achieved_per_s"],
                lower_better=["lateness_p99_ms", "cpu_ms_per_delivery"],
            )
    publish("peer", {"size": args.size, "rates": args.rates, "duration_s": args.duration}, groups)


if __name__ == "__main__":
    main()
