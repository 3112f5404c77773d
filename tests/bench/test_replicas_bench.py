"""bench.replicas at a tiny size, so it cannot rot: replicas on one throwaway PostgreSQL
database drain the burst and the sustained window with nothing lost and no duplicate
run rows, and the server's CPU and conflicts are counted (timings are never asserted).
The tests that need the server take ``pg_cluster`` (marked ``postgres``; they skip, and
the run lists them, where PostgreSQL is missing)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import replicas
from bench.pgserver import Server
from bench.processes import Sink, family_cpu_seconds, sink
from tests.postgres_cluster import Cluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def the_sink() -> Iterator[Sink]:
    with sink() as running:
        yield running


def test_two_replicas_drain_a_burst_with_nothing_lost_or_doubled(
    pg_cluster: Cluster, tmp_path: Path, the_sink: Sink
) -> None:
    conflicts: Counter[str] = Counter()
    figures = replicas.pg_burst_once(Server(pg_cluster), tmp_path, count=2, n=40,
                                     the_sink=the_sink, conflicts=conflicts, lead_s=12,
                                     timeout_s=60)  # fmt: skip
    assert (figures["lost"], figures["duplicate_runs"]) == (0, 0)
    assert figures["replicas_delivering"] in (1, 2)
    assert figures["cpu_postgres_ms_per_delivery"] > 0  # the server's own CPU is counted
    assert figures["cpu_steeple_ms_per_delivery"] > 0
    assert figures["transactions_per_delivery"] >= 1  # at least the claim or completion
    assert figures["retries"] == sum(conflicts.values())


def test_two_replicas_sustain_a_small_rate(
    pg_cluster: Cluster, tmp_path: Path, the_sink: Sink
) -> None:
    figures = replicas.pg_sustained_once(Server(pg_cluster), tmp_path, count=2, rate=10,
                                         seconds=3, the_sink=the_sink,
                                         conflicts=Counter())  # fmt: skip
    assert (figures["undelivered"], figures["duplicate_runs"]) == (0, 0)
    assert figures["achieved_per_s"] > 0 and figures["cpu_postgres_ms_per_delivery"] > 0


def test_the_command_prints_every_arm_side_by_side(pg_cluster: Cluster) -> None:
    # pg_cluster only for the skip: the command starts its own server, as a user's would.
    argv = [sys.executable, "-m", "bench.replicas", "--replicas", "2", "--burst", "20",
            "--sustained-rate", "5", "--seconds", "2", "--runs", "1", "--lead", "15"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "== burst 20 (medians)" in out and "== sustained 5/s for 2 s (medians)" in out
    table = out.split("== burst 20 (medians)", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table[1].split() == ["figure", "sqlite", "pg", "×2"]
    lost = next(line.split() for line in table if line.startswith("lost "))
    duplicate_runs = next(line.split() for line in table if line.startswith("duplicate_runs "))
    assert lost == ["lost", "0", "0"]
    assert duplicate_runs == ["duplicate_runs", "n/a", "0"]  # SQLite: not counted


def test_family_cpu_counts_a_child_that_ended() -> None:
    before = family_cpu_seconds(os.getpid())
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True, timeout=60)
    assert family_cpu_seconds(os.getpid()) - before >= 0.25


def test_conflicts_are_counted_by_the_statement_that_met_them(tmp_path: Path) -> None:
    cluster = Cluster(Path("/"), tmp_path, "127.0.0.1", 1, tmp_path, None)
    cluster.log_file.write_text("old line\n")
    server = Server(cluster)
    offset = server.log_offset()
    with cluster.log_file.open("a") as log:
        log.write(
            "2026-12-02 00:30:01 UTC [1] ERROR:  could not serialize access due to read/write"
            " dependencies among transactions\n"
            "2026-12-02 00:30:01 UTC [1] DETAIL:  Reason code: Canceled on identification.\n"
            "2026-12-02 00:30:01 UTC [1] STATEMENT:  UPDATE job_runs SET state = $1\n"
            "2026-12-02 00:30:02 UTC [2] ERROR:  deadlock detected\n"
            "2026-12-02 00:30:02 UTC [2] STATEMENT:  UPDATE job_runs   SET state = $1\n"
            "2026-12-02 00:30:03 UTC [3] ERROR:  duplicate key value\n"
        )
    assert server.conflicts_since(offset) == Counter({"UPDATE job_runs SET state = $1": 2})
