"""pyspy: where the appliance's CPU goes over one burst, per thread, sampled by py-spy.

``python -m bench.pyspy record --size 5000 --out RAW [--exe py-spy] [--rate 250]
[--native]``: the burst of :mod:`bench.burst` (N occurrences due at one second) with
``py-spy record --threads --gil --format raw`` attached to the appliance from its start
until the sink has every delivery; prints the appliance's CPU (all threads, ms per
delivery, per thread) and the drain time. ``--gil`` keeps only samples holding the GIL, so
the shares are of the interpreter's work; ``--native`` adds C frames (slower sampling).
py-spy is not a dependency: install it apart (``pip install --target DIR py-spy``) and
pass ``--exe DIR/bin/py-spy``.

``python -m bench.pyspy fold RAW [--thread NAME] [--top 60]``: the raw stacks folded per
thread — the event loop's thread (``main``) and the worker threads (``worker``) — into the
inclusive share of each function (its samples anywhere on the stack, once per sample)
and the self share (the sample's innermost frame), line numbers dropped. ``--thread``
keeps only threads whose name contains NAME.
"""

from __future__ import annotations

import argparse
import collections
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench import burst
from bench.processes import Appliance, cpu_seconds, sink, thread_cpu

_LINE = re.compile(r":\d+\)")
_PATH = re.compile(r" \(.*/")


@contextmanager
def recording(pid: int, out: Path, *, exe: str, rate: int, native: bool) -> Iterator[None]:
    """py-spy sampling ``pid`` into ``out`` (raw folded stacks) while the block runs."""
    mode = "--native" if native else "--nonblocking"
    argv = [exe, "record", "--pid", str(pid), "--rate", str(rate), "--threads", "--gil", mode]
    spy = subprocess.Popen(
        [*argv, "--format", "raw", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes the file on SIGINT
        spy.wait(30)


def record(n: int, out: Path, *, exe: str, rate: int, native: bool, lead_s: float) -> None:
    with tempfile.TemporaryDirectory() as tmp, sink() as the_sink:
        data_dir = Path(tmp) / "data"
        at_ms = (int(time.time() * 1000) // 1000 + int(lead_s) + 1) * 1000
        burst.prepare(data_dir, n=n, url=the_sink.url, at_ms=at_ms)
        app = Appliance(data_dir).start()
        try:
            with recording(app.pid, out, exe=exe, rate=rate, native=native):
                cpu0, threads0 = cpu_seconds(app.pid), thread_cpu(app.pid)
                the_sink.wait_distinct(n, timeout=at_ms / 1000 - time.time() + 120)
                cpu = cpu_seconds(app.pid) - cpu0
                threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu(app.pid).items()}
        finally:
            app.stop()
    drained = time.time() - at_ms / 1000
    print(f"cpu_s={cpu:.3f} cpu_ms_per_delivery={1000 * cpu / n:.3f} drained_s<={drained:.2f}")
    print("threads: " + ", ".join(f"{k}={v:.3f}" for k, v in sorted(threads.items())))
    print(f"wrote {out}")


@dataclass
class Folded:
    """Samples per thread group, and per function: inclusive and self."""

    samples: collections.Counter[str] = field(default_factory=collections.Counter)
    inclusive: dict[str, collections.Counter[str]] = field(default_factory=dict)
    own: dict[str, collections.Counter[str]] = field(default_factory=dict)


def thread_group(name: str) -> str:
    """``main`` for the event loop's thread (py-spy names it after the process), else
    ``worker``."""
    if "MainThread" in name or ("python" in name.lower() and "Trio" not in name):
        return "main"
    return "worker"


def frame_name(frame: str) -> str:
    """``fn (dir/mod.py:12)`` → ``fn (mod.py)``: one entry per function."""
    return _LINE.sub(")", _PATH.sub(" (", frame))


def fold(lines: Iterable[str], *, thread: str | None = None) -> Folded:
    """Fold py-spy's raw lines (``thread;frame;…;frame COUNT``, outermost frame first)."""
    folded = Folded()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        name, *frames = stack.split(";")
        if thread is not None and thread not in name:
            continue
        group, n = thread_group(name), int(count)
        folded.samples[group] += n
        inclusive = folded.inclusive.setdefault(group, collections.Counter())
        for function in {frame_name(f) for f in frames}:
            inclusive[function] += n
        if frames:
            folded.own.setdefault(group, collections.Counter())[frame_name(frames[-1])] += n
    return folded


def report(folded: Folded, *, top: int) -> str:
    lines = [f"samples: {dict(folded.samples)}"]
    for group, total in folded.samples.items():
        for title, counter, k in (
            ("inclusive", folded.inclusive, top),
            ("self", folded.own, top // 2),
        ):
            lines.append(f"== {group} ({total} samples), {title}")
            for function, n in counter.get(group, collections.Counter()).most_common(k):
                lines.append(f"{100 * n / total:5.1f}% {function}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="a burst with py-spy attached")
    rec.add_argument("--size", type=int, default=5000)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--exe", default="py-spy")
    rec.add_argument("--rate", type=int, default=250, help="samples per second")
    rec.add_argument("--native", action="store_true")
    rec.add_argument("--lead", type=float, default=20.0, help="seconds until the burst")
    agg = commands.add_parser("fold", help="shares per function of a raw file")
    agg.add_argument("raw", type=Path)
    agg.add_argument("--thread")
    agg.add_argument("--top", type=int, default=60)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.size, args.out, exe=args.exe, rate=args.rate, native=args.native,
               lead_s=args.lead)  # fmt: skip
    else:
        with args.raw.open(encoding="utf-8") as raw:
            print(report(fold(raw, thread=args.thread), top=args.top))


if __name__ == "__main__":
    main()
