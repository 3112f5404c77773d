"""ab: the same benchmark on two or more trees (commits), interleaved, side by side.

``python -m bench.ab --arm base=/tmp/base --arm branch=. [--rounds 3] [--figures F,G]
[--keep DIR] -- bench.burst --size 2000 --runs 1`` runs ``python -m <module> <args>`` once
per arm per round, each from its own tree (``PYTHONPATH`` and the working directory set to
it: a ``git worktree`` or ``git archive`` copy of a commit), the order rotated every round
(round 1: A B C, round 2: B C A, …) so a drift of the machine's load is spread over the
arms rather than charged to one. Before each invocation the load average is printed; each
invocation's result JSON (the ``wrote PATH`` line every benchmark prints) is read back, and
copied into ``--keep`` as ``<arm>-r<round>.json`` when given.

Printed and written (``bench/results/ab-<timestamp>.json``): every figure of every run per
arm, ``median | min–max`` per arm, and the arms' medians side by side; ``--figures`` keeps
only the named ones. Driving ``bench.fixed_clock`` makes every arm plan the same minute:
``-- bench.fixed_clock 1796164890000 --sizes 100000 --runs 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.report import Figures, publish

_WROTE = re.compile(r"^wrote (\S+\.json)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Arm:
    name: str
    tree: Path


def parse_arm(text: str) -> Arm:
    name, sep, tree = text.partition("=")
    if not sep or not name or not tree:
        raise argparse.ArgumentTypeError(f"--arm NAME=DIR, not {text!r}")
    return Arm(name, Path(tree).resolve())


def order(arms: Sequence[Arm], round_: int) -> list[Arm]:
    """The arms of round ``round_`` (from 0), rotated by one per round."""
    k = round_ % len(arms)
    return [*arms[k:], *arms[:k]]


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def written(output: str) -> Path:
    """The result file a benchmark's output names (the last ``wrote PATH`` line)."""
    found = _WROTE.findall(output)
    if not found:
        raise RuntimeError("the benchmark wrote no result file:\n" + output[-2000:])
    return Path(found[-1])


def figures_of(document: Mapping[str, object], keep: Sequence[str]) -> list[Figures]:
    """Every run of every group in a result document: its numeric figures, only the
    ``keep`` ones if named."""
    runs = document["runs"]
    assert isinstance(runs, dict)
    return [
        {
            k: float(v)
            for k, v in run.items()
            if isinstance(v, int | float) and (not keep or k in keep)
        }
        for group in runs.values()
        for run in group
    ]


def invoke(arm: Arm, command: Sequence[str]) -> Path:
    """``python -m command…`` from ``arm``'s tree; the result file it wrote."""
    env = {**os.environ, "PYTHONPATH": str(arm.tree)}
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=arm.tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{arm.name}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return written(done.stdout)


def interleave(
    arms: Sequence[Arm],
    command: Sequence[str],
    *,
    rounds: int,
    keep: Sequence[str],
    into: Path | None,
) -> dict[str, list[Figures]]:
    runs: dict[str, list[Figures]] = {arm.name: [] for arm in arms}
    for round_ in range(rounds):
        for arm in order(arms, round_):
            print(f"== round {round_ + 1} {arm.name} load {load_average()}", flush=True)
            result = invoke(arm, command)
            found = figures_of(json.loads(result.read_text()), keep)
            for figures in found:
                print("  " + ", ".join(f"{k}={v:.4g}" for k, v in figures.items()), flush=True)
            runs[arm.name] += found
            if into is not None:
                into.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(result, into / f"{arm.name}-r{round_ + 1}.json")
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", type=parse_arm, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--figures", default="", help="comma-separated; default: all")
    parser.add_argument("--keep", type=Path, help="copy each invocation's result JSON here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- MODULE ARGS…")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or len(args.arm) < 2 or len({a.name for a in args.arm}) < len(args.arm):
        parser.error("two or more --arm with distinct names, then -- MODULE ARGS…")
    keep = [f for f in args.figures.split(",") if f]
    runs = interleave(args.arm, command, rounds=args.rounds, keep=keep, into=args.keep)
    groups = {f"ab: {name}": found for name, found in runs.items()}
    params = {"command": " ".join(command), "rounds": args.rounds}
    params |= {f"arm {a.name}": str(a.tree) for a in args.arm}
    publish("ab", params, groups, compare={"ab": list(groups)})


if __name__ == "__main__":
    main()
