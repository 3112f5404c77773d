"""fixed_clock: run a tree's own ``bench.planner`` with the wall clock read as a fixed
instant, so every arm of an A/B plans the same minute (the cron mix's work depends on
which minute it plans).

``python -m bench.fixed_clock [--tree DIR] T0_MS [bench.planner args…]``: ``appliance`` and
``bench`` are imported from ``DIR`` (default: the current directory; a ``git worktree`` or
``git archive`` copy of any commit, which needs no ``fixed_clock`` of its own), and
``time.time()`` returns T0 − 1 s, so the planner's minute starts at T0 exactly (T0 a whole
second). Everything after T0_MS goes to ``bench.planner``, e.g. ``--sizes 100000 --runs 1``;
its JSON lands in that tree's ``bench/results/``. ``bench.ab`` runs it for each arm.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
from pathlib import Path

MODULE = "bench.planner"


def _forget(*packages: str) -> None:
    """Drop already imported ``packages`` (this tree's), so the next import reads ``--tree``'s."""
    for name in list(sys.modules):
        if name.split(".")[0] in packages:
            del sys.modules[name]


def freeze_clock(t0_ms: int) -> None:
    """``time.time()`` returns ``t0_ms`` − 1 s from now on (whole process)."""
    frozen = (t0_ms - 1000) / 1000
    time.time = lambda: frozen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path.cwd(), help="whose appliance/bench")
    parser.add_argument("t0_ms", type=int, help="the planned minute's start, unix ms, whole s")
    args, rest = parser.parse_known_args(argv)
    if args.t0_ms % 1000:
        parser.error("T0_MS must be a whole second")
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    _forget("appliance", "bench")
    freeze_clock(args.t0_ms)
    import appliance  # after the path and the clock are set: --tree's

    print(f"# appliance from {os.path.dirname(appliance.__file__)}, T0 = {args.t0_ms}", flush=True)
    sys.argv = [MODULE, *rest]
    runpy.run_module(MODULE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
