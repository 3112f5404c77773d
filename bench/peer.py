"""peer: the burst and steady workloads against Steeple and its peers — APScheduler 3.11
and a naive poller — side by side in one run, with Steeple's ratio to each.

Each peer runs in its own process against the same sink, measured the same way (sink
records, /proc CPU; :mod:`bench.peers`): ``apscheduler`` (:mod:`bench.apscheduler_runner`:
AsyncIOScheduler, SQLAlchemyJobStore on SQLite, httpx POST jobs, 32 in flight) and
``naive`` (:mod:`bench.naive_runner`: a SQLite table polled every 100 ms, one synchronous
POST at a time, one commit per delivery). Setup of any system is not measured. Run i of
every arm comes before run i + 1 of any, so the arms meet the same load. Ratios are
Steeple ÷ peer for rates and peer ÷ Steeple for times and CPU (> 1: Steeple better).

The mixed-latency workload (``--mixed N``, issue 24's "receivers taking 5–50 ms, 20
hosts"): N occurrences due at one second, occurrence ``i`` to host ``i % --mixed-hosts``
(a distinct loopback address of the sink) whose answer takes a latency drawn
deterministically from ``i`` in 5–50 ms (:mod:`bench.mixed`), the same receivers for
every arm; measured as the burst is (all delivered after, lateness, CPU per delivery).

``python -m bench.peer [--size 10000] [--rates 500] [--duration 60] [--mixed 2000]
[--mixed-hosts 20] [--runs 3] [--peers apscheduler,naive] [--answer-ms 0]``: ``--size 0``,
``--rates ""``, ``--mixed 0`` skip a workload; ``--answer-ms N`` makes the sink answer
each delivery of the burst and steady workloads N ms after it arrived (a receiver that
does some work; lateness still counts arrivals), where one POST at a time shows what it
costs. ``--steeple-env STEEPLE_NAME=value`` (repeatable) gives Steeple's processes a
setting in every arm, e.g. ``STEEPLE_TENANT_MAX_IN_FLIGHT=32``: one tenant owns all the
schedules here, and by default a tenant may fill half of the 32 delivery slots.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench import mixed
from bench.burst import burst_once
from bench.peers import RUNNERS, peer_burst_once, peer_steady_once
from bench.processes import Sink, sink
from bench.report import Figures, base_parser, publish, repeat
from bench.steady import steady_once

BURST_LOWER_BETTER = ["all_delivered_s", "lateness_p99_ms", "cpu_ms_per_delivery"]
STEADY_LOWER_BETTER = ["lateness_p99_ms", "cpu_ms_per_delivery"]

Groups = dict[str, list[Figures]]


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


def arm_groups(
    title: str,
    runs: dict[str, list[Figures]],
    *,
    higher_better: list[str],
    lower_better: list[str],
) -> Groups:
    """``<title>: <arm>`` for Steeple and each peer, then ``<title>: ratio vs <peer>``."""
    groups = {f"{title}: {arm}": arm_runs for arm, arm_runs in runs.items()}
    for peer in [arm for arm in runs if arm != "steeple"]:
        groups[f"{title}: ratio vs {peer}"] = ratios(
            runs["steeple"], runs[peer], higher_better=higher_better, lower_better=lower_better
        )
    return groups


def burst_arms(
    work: Path, args: argparse.Namespace, peers: list[str], leads: dict[str, float], the_sink: Sink
) -> Groups:
    runs: dict[str, list[Figures]] = {arm: [] for arm in ["steeple", *peers]}

    def one(_i: int) -> Figures:
        runs["steeple"].append(burst_once(work, n=args.size, lead_s=args.lead,
                                          timeout_s=args.timeout, the_sink=the_sink,
                                          env=args.steeple_env))  # fmt: skip
        for peer in peers:
            runs[peer].append(peer_burst_once(work, n=args.size, lead_s=leads[peer],
                                              timeout_s=args.timeout, the_sink=the_sink,
                                              kind=peer))  # fmt: skip
        return {f"{arm}_s": arm_runs[-1]["all_delivered_s"] for arm, arm_runs in runs.items()}

    repeat(args.runs, one)
    return arm_groups(f"burst {args.size}", runs, higher_better=[],
                      lower_better=BURST_LOWER_BETTER)  # fmt: skip


def mixed_title(args: argparse.Namespace) -> str:
    lo, hi = mixed.LATENCY_MS
    return f"mixed {args.mixed}, {args.mixed_hosts} hosts, {lo}–{hi} ms"


def mixed_arms(
    work: Path, args: argparse.Namespace, peers: list[str], leads: dict[str, float], the_sink: Sink
) -> Groups:
    """The mixed-latency burst (:mod:`bench.mixed`), every arm to the same receivers."""
    urls = mixed.targets(the_sink.port, args.mixed, hosts=args.mixed_hosts)
    runs: dict[str, list[Figures]] = {arm: [] for arm in ["steeple", *peers]}
    peer_leads = {**leads, "apscheduler": args.peer_lead or 10 + args.mixed / 300}

    def one(_i: int) -> Figures:
        runs["steeple"].append(burst_once(work, n=args.mixed, lead_s=args.lead,
                                          timeout_s=args.timeout, the_sink=the_sink,
                                          urls=urls, env=args.steeple_env))  # fmt: skip
        for peer in peers:
            runs[peer].append(peer_burst_once(work, n=args.mixed, lead_s=peer_leads[peer],
                                              timeout_s=args.timeout, the_sink=the_sink,
                                              kind=peer, urls=urls))  # fmt: skip
        return {f"{arm}_s": arm_runs[-1]["all_delivered_s"] for arm, arm_runs in runs.items()}

    repeat(args.runs, one)
    return arm_groups(mixed_title(args), runs, higher_better=[],
                      lower_better=BURST_LOWER_BETTER)  # fmt: skip


def steady_arms(
    work: Path, args: argparse.Namespace, peers: list[str], rate: int, the_sink: Sink
) -> Groups:
    runs: dict[str, list[Figures]] = {arm: [] for arm in ["steeple", *peers]}
    for i in range(args.runs):
        runs["steeple"].append(
            steady_once(
                work, rate=rate, duration_s=args.duration, the_sink=the_sink, env=args.steeple_env
            )
        )
        for peer in peers:
            runs[peer].append(peer_steady_once(work, rate=rate, duration_s=args.duration,
                                               the_sink=the_sink, kind=peer))  # fmt: skip
        achieved = ", ".join(f"{arm} {r[-1]['achieved_per_s']:.0f}/s" for arm, r in runs.items())
        print(f"  steady {rate}/s run {i + 1}: {achieved}", flush=True)
    return arm_groups(f"steady {rate}/s", runs, higher_better=["achieved_per_s"],
                      lower_better=STEADY_LOWER_BETTER)  # fmt: skip


def parse_peers(text: str) -> list[str]:
    peers = [p for p in text.split(",") if p]
    unknown = sorted(set(peers) - set(RUNNERS))
    if unknown:
        raise SystemExit(f"--peers: unknown {', '.join(unknown)} (known: {', '.join(RUNNERS)})")
    return list(dict.fromkeys(peers))


def parse_setting(text: str) -> tuple[str, str]:
    """``STEEPLE_NAME=value`` (docs/configuration.md) for Steeple's processes."""
    name, sep, value = text.partition("=")
    if not sep or not name.startswith("STEEPLE_"):
        raise argparse.ArgumentTypeError(f"{text!r}: want STEEPLE_NAME=value")
    return name, value


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="burst size (0: skip)")
    parser.add_argument("--rates", default="500", help="steady rates (empty: skip)")
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--mixed", type=int, default=2_000,
                        help="mixed-latency burst size (0: skip)")  # fmt: skip
    parser.add_argument("--mixed-hosts", type=int, default=mixed.HOSTS,
                        help="distinct receiver addresses (1–250)")  # fmt: skip
    parser.add_argument(
        "--peers", default="apscheduler,naive", help="comma-separated (empty: Steeple alone)"
    )
    parser.add_argument("--lead", type=float, default=12.0, help="Steeple burst lead (s)")
    parser.add_argument("--peer-lead", type=float, help="APScheduler burst lead (s)")
    parser.add_argument("--naive-lead", type=float, default=5.0, help="naive burst lead (s)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--answer-ms", type=int, default=0, help="the sink answers each delivery after (ms)"
    )
    parser.add_argument(
        "--steeple-env",
        type=parse_setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for Steeple's processes in every arm, e.g. "
        "STEEPLE_TENANT_MAX_IN_FLIGHT=32 (repeatable)",
    )
    args = parser.parse_args()
    args.steeple_env = dict(args.steeple_env)
    if not 1 <= args.mixed_hosts <= 250:
        parser.error("--mixed-hosts must be 1–250")
    peers = parse_peers(args.peers)
    leads = {"apscheduler": args.peer_lead or 10 + args.size / 300, "naive": args.naive_lead}
    groups: Groups = {}
    compare: dict[str, list[str]] = {}
    with (
        tempfile.TemporaryDirectory(dir=args.workdir) as tmp,
        sink(answer_ms=args.answer_ms, hosts=args.mixed_hosts if args.mixed else 0) as the_sink,
    ):
        work = Path(tmp)
        titled: list[tuple[str, Groups]] = []
        if args.size:
            titled.append((f"burst {args.size}", burst_arms(work, args, peers, leads, the_sink)))
        if args.mixed:
            titled.append((mixed_title(args), mixed_arms(work, args, peers, leads, the_sink)))
        for rate in [int(r) for r in args.rates.split(",") if r]:
            titled.append((f"steady {rate}/s", steady_arms(work, args, peers, rate, the_sink)))
        for title, arm in titled:
            groups.update(arm)
            compare[title] = [f"{title}: {a}" for a in ["steeple", *peers]]
    params = {"size": args.size, "rates": args.rates, "duration_s": args.duration,
              "peers": ",".join(peers), "answer_ms": args.answer_ms, "mixed": args.mixed,
              "mixed_hosts": args.mixed_hosts,
              "steeple_env": " ".join(f"{k}={v}" for k, v in args.steeple_env.items())}  # fmt: skip
    publish("peer", params, groups, compare=compare)


if __name__ == "__main__":
    main()
