"""Results: the machine header, median/min/max over runs, the printed table, the JSON file.

Every benchmark returns one ``dict[str, float]`` of figures per run; :func:`publish` prints
``figure | median | min–max`` and writes ``bench/results/<name>-<timestamp>.json`` with the
header, the parameters, every run and the summary.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
_PACKAGES = ("trio", "apsw", "httptools", "httpx", "httpcore", "h11", "hypercorn", "quart-trio",
             "croniter", "apscheduler", "sqlalchemy")  # fmt: skip

Figures = dict[str, float]


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": _sqlite_version(),
        "commit": _commit(),
        "packages": versions,
    }


def _sqlite_version() -> str:
    import apsw

    return str(apsw.sqlite_lib_version())


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "appliance"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def summarise(runs: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    keys = [k for k in runs[0]] if runs else []
    return {
        k: {
            "median": statistics.median(r[k] for r in runs),
            "min": min(r[k] for r in runs),
            "max": max(r[k] for r in runs),
        }
        for k in keys
    }


def _fmt(value: float) -> str:
    if value != value:  # NaN
        return "n/a"
    if abs(value) >= 1000 or value == int(value):
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def table(title: str, summary: Mapping[str, Mapping[str, float]]) -> str:
    width = max([len(k) for k in summary] + [6])
    lines = [title, f"{'figure':<{width}}  {'median':>12}  {'min–max':>25}"]
    for key, s in summary.items():
        spread = f"{_fmt(s['min'])}–{_fmt(s['max'])}"
        lines.append(f"{key:<{width}}  {_fmt(s['median']):>12}  {spread:>25}")
    return "\n".join(lines)


def side_by_side(title: str, summaries: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """One column per group (its medians), one row per figure any group has: arms of one
    comparison read across. A figure a group lacks shows ``n/a``."""
    keys = list(dict.fromkeys(k for summary in summaries.values() for k in summary))
    width = max([len(k) for k in keys] + [6])
    cols = [max(len(g), 10) for g in summaries]
    lines = [
        title,
        f"{'figure':<{width}}"
        + "".join(f"  {g:>{c}}" for g, c in zip(summaries, cols, strict=True)),
    ]
    nan = {"median": float("nan")}
    for key in keys:
        cells = [_fmt(s.get(key, nan)["median"]) for s in summaries.values()]
        lines.append(
            f"{key:<{width}}" + "".join(f"  {v:>{c}}" for v, c in zip(cells, cols, strict=True))
        )
    return "\n".join(lines)


def header(info: Mapping[str, Any]) -> str:
    pk = info["packages"]
    return (
        f"# {info['date']}  commit {info['commit']}  {info['cpu']}  cores={info['cores']}"
        f"  Python {info['python']}  SQLite {info['sqlite']}\n# "
        + " ".join(f"{k}={v}" for k, v in pk.items())
    )


def publish(
    name: str,
    params: Mapping[str, Any],
    groups: Mapping[str, Sequence[Mapping[str, float]]],
    *,
    extra: Mapping[str, Any] | None = None,
    compare: Mapping[str, Sequence[str]] | None = None,
) -> Path:
    """Print one table per group of runs (e.g. per rate) and write the JSON file.
    ``compare`` maps a title to groups printed side by side after them (medians), each
    column named by its group's name less a leading ``"<title>: "``."""
    info = machine()
    print(header(info))
    print(f"# {name} " + " ".join(f"{k}={v}" for k, v in params.items()))
    summaries = {}
    for group, runs in groups.items():
        summaries[group] = summarise(runs)
        print(table(f"\n== {group} ({len(runs)} runs)", summaries[group]))
    for title, names in (compare or {}).items():
        columns = {g.removeprefix(f"{title}: "): summaries[g] for g in names}
        print(side_by_side(f"\n== {title} (medians)", columns))
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{name}-{stamp}.json"
    document = {
        "benchmark": name,
        "machine": info,
        "params": dict(params),
        "runs": {g: list(r) for g, r in groups.items()},
        "summary": summaries,
        **(dict(extra) if extra else {}),
    }
    path.write_text(json.dumps(document, indent=2, default=str))
    print(f"\nwrote {path}")
    return path


def repeat(runs: int, one: Callable[[int], Figures]) -> list[Figures]:
    """Run ``one(i)`` ``runs`` times, printing each run's figures as it finishes."""
    results = []
    for i in range(runs):
        figures = one(i)
        print(f"  run {i + 1}/{runs}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in figures.items()),
              flush=True)  # fmt: skip
        results.append(figures)
    return results


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=3, help="repetitions (median of these)")
    parser.add_argument("--workdir", type=Path, help="where data dirs go (default: a tmp dir)")
    return parser
