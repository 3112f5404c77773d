"""Scaling against the CPU figures (``bench.replicas --pg-cpus``): the PostgreSQL server
pinned to a CPU list, and for each ×R arm beside a ×1 arm, per run pair:

- ``gain_measured`` = drain rate ×R ÷ drain rate ×1 (the burst);
- ``gain_predicted`` = :func:`predicted_rate` ÷ rate(×1): the least of R × rate(×1) (each
  replica as fast as one alone), PostgreSQL's cores ÷ its CPU per delivery, and all the
  box's cores ÷ the total CPU per delivery (the replicas and the server share them), the
  CPU per delivery measured in the ×1 run; ``gain_predicted_from_own_cpu`` takes it from
  the ×R run instead (what the costs the replicas actually paid allow);
- ``measured_over_predicted``, and the cores each arm kept busy (rate × CPU per delivery,
  PostgreSQL's and in all).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from bench import pgserver
from bench.pgserver import Server
from bench.report import Figures


def predicted_rate(replicas: int, one_rate: float, figures: Figures, *, pg_cores: int,
                   cores: int) -> float:  # fmt: skip
    """The drain rate ``replicas`` replicas should reach, from one replica's measured rate
    and a run's CPU per delivery: the least of ``replicas`` × one replica's rate (each
    replica as fast as one alone), PostgreSQL's cores ÷ its CPU per delivery, and the
    box's cores ÷ the total CPU per delivery (the replicas and the server share them)."""
    pg_ms = figures["cpu_postgres_ms_per_delivery"]
    total_ms = figures["cpu_total_ms_per_delivery"]
    return min(
        replicas * one_rate,
        1000 * pg_cores / pg_ms if pg_ms else float("inf"),
        1000 * cores / total_ms if total_ms else float("inf"),
    )


def scaling_runs(one: list[Figures], many: list[Figures], replicas: int, *, pg_cores: int,
                 cores: int) -> list[Figures]:  # fmt: skip
    """Per run pair (run i of ×1 and of ×``replicas``): the measured gain in drain rate
    beside the gain predicted from ×1's CPU per delivery (and from ×R's own)."""
    out = []
    for a, b in zip(one, many, strict=True):
        rate = a["drain_per_s"]
        predicted = predicted_rate(replicas, rate, a, pg_cores=pg_cores, cores=cores) / rate
        own = predicted_rate(replicas, rate, b, pg_cores=pg_cores, cores=cores) / rate
        gain = b["drain_per_s"] / rate
        out.append({
            "gain_measured": gain,
            "gain_predicted": predicted,
            "measured_over_predicted": gain / predicted,
            "gain_predicted_from_own_cpu": own,
            "postgres_cores_busy_x1": rate * a["cpu_postgres_ms_per_delivery"] / 1000,
            f"postgres_cores_busy_x{replicas}":
                b["drain_per_s"] * b["cpu_postgres_ms_per_delivery"] / 1000,
            "cores_busy_x1": rate * a["cpu_total_ms_per_delivery"] / 1000,
            f"cores_busy_x{replicas}": b["drain_per_s"] * b["cpu_total_ms_per_delivery"] / 1000,
        })  # fmt: skip
    return out


def groups_for(burst: int, counts: list[int], groups: dict[str, list[Figures]],
               arm_name: Callable[[int], str], *,
               pg_cpus: set[int] | None) -> dict[str, list[Figures]]:  # fmt: skip
    """``burst N: ×R vs ×1`` for each R > 1 beside a ×1 arm, over the runs both finished
    (``groups`` by ``burst N: <arm_name(R)>``)."""
    title = f"burst {burst}"
    one = groups.get(f"{title}: {arm_name(1)}", [])
    pg_cores = len(pg_cpus) if pg_cpus else os.cpu_count() or 1
    out = {}
    for count in [c for c in counts if c > 1]:
        many = groups.get(f"{title}: {arm_name(count)}", [])
        pairs = min(len(one), len(many))
        if pairs:
            out[f"{title}: ×{count} vs ×1"] = scaling_runs(
                one[:pairs], many[:pairs], count, pg_cores=pg_cores, cores=os.cpu_count() or 1
            )
    if out:
        print(
            f"\nscaling: gain_predicted = min({{R}} × rate(×1), {pg_cores} PostgreSQL core(s)"
            " ÷ its CPU ms per delivery, all cores ÷ the total CPU ms per delivery) ÷"
            " rate(×1), from ×1's CPU figures (gain_predicted_from_own_cpu: ×R's)"
        )
    return out


def pin_server(server: Server, cpus: set[int] | None) -> None:
    """``--pg-cpus``: the server confined to those CPUs for the whole benchmark."""
    if cpus:
        pinned = pgserver.pin(server, cpus)
        print(f"PostgreSQL pinned to CPUs {sorted(cpus)} ({pinned} processes)", flush=True)


def cpu_list(text: str) -> set[int]:
    try:
        return pgserver.parse_cpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
