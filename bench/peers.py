"""The peers :mod:`bench.peer` sets beside Steeple, each in its own process against the
same sink, measured the same way (sink records, /proc CPU of that process); their setup
(adding the jobs) is not measured.

- ``apscheduler``: :mod:`bench.apscheduler_runner` (APScheduler 3.11, AsyncIOScheduler,
  SQLAlchemyJobStore on SQLite, httpx POSTs, 32 in flight);
- ``naive``: :mod:`bench.naive_runner` (a SQLite table polled every 100 ms, one
  synchronous POST at a time, one commit per delivery).

Both take the same arguments and send the same keys (``j<i>@<scheduled_for>``), so one
expectation judges either.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from appliance.core.instants import format_scheduled_for
from bench import mixed
from bench.deliveries import judge
from bench.processes import Sink, cpu_seconds
from bench.report import Figures
from bench.steady import measure_window, process_meters

RUNNERS = {"apscheduler": "bench.apscheduler_runner", "naive": "bench.naive_runner"}


class Peer:
    """A running peer process (``kind`` names it in :data:`RUNNERS`)."""

    def __init__(
        self,
        workdir: Path,
        *,
        kind: str,
        url: str,
        jobs: int,
        trigger: list[str],
        urls: Sequence[str] | None = None,
    ) -> None:
        self.kind = kind
        home = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=workdir))
        argv = ["-m", RUNNERS[kind], "--db", str(home / "jobs.sqlite"), "--url", url,
                "--jobs", str(jobs)]  # fmt: skip
        if urls:  # job i posts to urls[i] (bench.mixed)
            argv += ["--targets", str(mixed.write_targets(home / "targets.txt", list(urls)))]
        self.proc = subprocess.Popen([sys.executable, *argv, *trigger],
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {self.kind} runner did not start")

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
    workdir: Path,
    *,
    n: int,
    lead_s: float,
    timeout_s: float,
    the_sink: Sink,
    kind: str = "apscheduler",
    urls: Sequence[str] | None = None,
) -> Figures:
    """``n`` jobs due at one second, ``lead_s`` after the peer starts: the burst's figures
    (job ``i`` to ``urls[i]`` when given, else the sink's URL)."""
    the_sink.reset()
    at = int(time.time() + lead_s) + 1
    peer = Peer(workdir, kind=kind, url=the_sink.url, jobs=n, trigger=["--at", str(at)],
                urls=urls)  # fmt: skip
    try:
        peer.wait_ready()
        if time.time() > at - 1:
            raise RuntimeError(f"{kind} setup of {n} jobs outlasted its lead of {lead_s} s")
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


def peer_steady_once(
    workdir: Path, *, rate: int, duration_s: int, the_sink: Sink, kind: str = "apscheduler"
) -> Figures:
    """``rate`` jobs every second, measured over a ``duration_s`` window as Steeple is."""
    the_sink.reset()
    peer = Peer(workdir, kind=kind, url=the_sink.url, jobs=rate, trigger=["--every-second"])
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
