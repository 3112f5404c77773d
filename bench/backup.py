"""backup: an online ``steeple backup`` of a large database while deliveries run → the
backup's duration, delivery lateness during it against a window without it, and the time
of a ``GET /metrics`` scrape at that size.

Setup (not measured): the scale benchmark's bulk data (S schedules that never fire during
the benchmark, R run rows with one attempt each: :func:`bench.scale.build`), plus RATE
schedules ``* * * * * *`` delivering to the sink (:func:`bench.steady.prepare`). One
appliance serves for every run; measuring starts once its start-up database check (which
reads the whole file) has passed. Each run, back to back under the same delivery load:

- *without*: a window of ``--window`` whole seconds; lateness of its occurrences (first
  arrival at the sink − ``scheduled_for``), after up to ``--drain`` s for stragglers;
- *with*: ``python -m appliance backup --to FILE`` (a separate process, as an operator runs
  it: one ``VACUUM INTO`` from its own connection, fsync, rename, ``integrity_check`` of the
  copy) started at a second boundary; the window is every whole second from then until the
  command exits, judged the same way. ``backup_s`` is the command's wall time (Python start
  included), ``wal_max_mb`` the largest WAL seen while it ran (a long read holds
  checkpoints back), ``backup_mb`` the copy's size; the copy is deleted after the run;
- *scrapes*: ``--scrapes`` sequential ``GET /metrics`` on one keep-alive connection while
  the deliveries go on; p50 and max client-observed ms, and the body's size.

A window's ``undelivered`` counts occurrences not delivered by the end of its drain.

``python -m bench.backup [--schedules 100000] [--run-rows 1000000] [--rate 50]
[--window 20] [--scrapes 20] [--runs 3]``
"""

from __future__ import annotations

import http.client
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import scale, seed, steady
from bench.deliveries import judge
from bench.processes import Appliance, Sink, sink
from bench.report import Figures, base_parser, percentile, publish, repeat

CHECK_PASSED = "database check passed"
START_TIMEOUT_S = 900


def judged(the_sink: Sink, due: steady.Due, seconds: range, *, drain_s: float) -> Figures:
    """Lateness figures of the occurrences scheduled in ``seconds`` (epoch s), once all
    are delivered or ``drain_s`` has passed since the window's end."""
    expected = {key: due_ms for second in seconds for key, due_ms in due(second * 1000)}
    deadline = seconds.stop + drain_s
    verdict = judge(the_sink.records(), expected)
    while verdict.lost and time.time() < deadline:
        time.sleep(0.5)
        verdict = judge(the_sink.records(), expected)
    figures = verdict.figures(expected)
    return {
        "undelivered": figures["lost"],
        "lateness_p50_ms": figures["lateness_p50_ms"],
        "lateness_p99_ms": figures["lateness_p99_ms"],
        "lateness_max_ms": figures["lateness_max_ms"],
    }


def without_backup(the_sink: Sink, due: steady.Due, *, window_s: int, drain_s: float) -> Figures:
    start = int(time.time()) + 1
    _sleep_until(start + window_s)
    figures = judged(the_sink, due, range(start, start + window_s), drain_s=drain_s)
    return {f"without_{k}": v for k, v in figures.items()}


def with_backup(
    the_sink: Sink, due: steady.Due, *, data_dir: Path, target: Path, drain_s: float
) -> Figures:
    db = seed.db_path(data_dir)
    wal = db.with_name(db.name + "-wal")
    start = int(time.time()) + 1
    _sleep_until(start)
    began = time.perf_counter()
    command = [sys.executable, "-m", "appliance", "backup", "--data-dir", str(data_dir)]
    proc = subprocess.Popen(
        [*command, "--to", str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wal_max = _size(wal)
    while proc.poll() is None:  # sample the WAL while the backup's read is open
        time.sleep(0.2)
        wal_max = max(wal_max, _size(wal))
    elapsed = time.perf_counter() - began
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"steeple backup failed: {err[-500:]}")
    copy_bytes = target.stat().st_size
    target.unlink()
    end = math.ceil(time.time())
    figures = judged(the_sink, due, range(start, end), drain_s=drain_s)
    return {
        "backup_s": elapsed,
        "backup_mb": copy_bytes / 2**20,
        "backup_mb_per_s": copy_bytes / 2**20 / elapsed,
        "wal_max_mb": wal_max / 2**20,
        "with_window_s": end - start,
        **{f"with_{k}": v for k, v in figures.items()},
    }


def scrapes(base_url: str, n: int) -> Figures:
    host, port = base_url.removeprefix("http://").rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    timings: list[float] = []
    size = 0
    try:
        for _ in range(n):
            began = time.perf_counter()
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            body = response.read()
            timings.append((time.perf_counter() - began) * 1000)
            if response.status != 200:
                raise RuntimeError(f"GET /metrics: {response.status} {body[:200]!r}")
            size = len(body)
    finally:
        conn.close()
    return {
        "metrics_scrape_p50_ms": percentile(timings, 50),
        "metrics_scrape_max_ms": max(timings),
        "metrics_kb": size / 1024,
    }


def _sleep_until(epoch_s: float) -> None:
    delay = epoch_s - time.time()
    if delay > 0:
        time.sleep(delay)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def prepare(
    data_dir: Path, *, schedules: int, runs: int, rate: int, url: str
) -> tuple[steady.Due, Figures]:
    """The bulk data, then the delivering schedules; what is due each second, and sizes."""
    built = scale.build(data_dir, schedules=schedules, runs=runs)
    ids, _ = steady.prepare(data_dir, rate=rate, url=url)
    sizes: Figures = {
        "run_rows": float(str(built["run_rows"])),
        "db_file_mb": seed.db_path(data_dir).stat().st_size / 2**20,
    }
    return steady.due_at_start(ids), sizes


def backup_runs(
    workdir: Path,
    *,
    schedules: int,
    runs: int,
    rate: int,
    window_s: int,
    scrape_count: int,
    repetitions: int,
    the_sink: Sink,
    drain_s: float = 10.0,
) -> list[Figures]:
    """Build once, serve once, then ``repetitions`` runs of (without, with, scrapes)."""
    data_dir = Path(tempfile.mkdtemp(prefix="backup-", dir=workdir)) / "data"
    the_sink.reset()
    began = time.perf_counter()
    due, sizes = prepare(data_dir, schedules=schedules, runs=runs, rate=rate, url=the_sink.url)
    print(f"  prepared in {time.perf_counter() - began:.0f} s: {sizes}", flush=True)
    app = Appliance(data_dir).start(timeout=START_TIMEOUT_S)
    try:
        _wait_for_log(app, CHECK_PASSED, timeout_s=START_TIMEOUT_S)

        def one(i: int) -> Figures:
            target = data_dir.parent / f"copy-{i}.db"
            figures = without_backup(the_sink, due, window_s=window_s, drain_s=drain_s)
            figures |= with_backup(the_sink, due, data_dir=data_dir, target=target, drain_s=drain_s)
            figures |= scrapes(app.base_url, scrape_count)
            return figures | sizes | {"offered_per_s": rate}

        return repeat(repetitions, one)
    finally:
        app.stop()


def _wait_for_log(app: Appliance, text: str, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(text in line for line in list(app.log)):
        if time.monotonic() > deadline or app.proc is None or app.proc.poll() is not None:
            raise RuntimeError(f"no {text!r} in the appliance's log:\n" + "".join(app.log[-20:]))
        time.sleep(0.2)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--run-rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=50, help="deliveries/s offered")
    parser.add_argument("--window", type=int, default=20, help="seconds without a backup")
    parser.add_argument("--scrapes", type=int, default=20, help="GET /metrics per run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp, sink() as the_sink:
        runs = backup_runs(
            Path(tmp),
            schedules=args.schedules,
            runs=args.run_rows,
            rate=args.rate,
            window_s=args.window,
            scrape_count=args.scrapes,
            repetitions=args.runs,
            the_sink=the_sink,
        )
    params = {
        "schedules": args.schedules,
        "run_rows": args.run_rows,
        "rate": args.rate,
        "window_s": args.window,
        "scrapes": args.scrapes,
    }
    label = f"backup of {args.schedules} schedules / {args.run_rows} runs at {args.rate}/s"
    publish("backup", params, {label: runs})


if __name__ == "__main__":
    main()
