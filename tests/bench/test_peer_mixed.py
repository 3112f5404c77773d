"""bench.peer's mixed-latency workload at a tiny size, so it cannot rot: the receivers are
distinct loopback addresses of one sink, each delivery's latency is drawn from its index
in 5–50 ms (the same receivers for every arm), and the command prints every arm's figures
and Steeple's ratios with the counts adding up (timings are never asserted)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import mixed, peer
from bench.naive_runner import Poster, add_jobs, open_db, run_pass
from bench.processes import Sink, sink

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
T = 1_800_000_000  # a whole epoch second


@pytest.fixture(scope="module")
def hosts_sink() -> Iterator[Sink]:
    with sink(hosts=4) as running:
        yield running


def test_the_latencies_are_deterministic_and_span_5_to_50_ms() -> None:
    drawn = [mixed.latency_ms(i) for i in range(2_000)]
    assert drawn == [mixed.latency_ms(i) for i in range(2_000)]
    assert (min(drawn), max(drawn)) == mixed.LATENCY_MS
    assert len(set(drawn)) == 46  # every millisecond of the range occurs
    urls = mixed.targets(8080, 40, hosts=20)
    assert len({url.split("/")[2] for url in urls}) == 20  # 20 distinct host:port
    assert urls[21] == f"http://127.0.0.3:8080/mixed/{mixed.latency_ms(21)}"


def test_each_job_reaches_its_own_host_and_is_answered(tmp_path: Path, hosts_sink: Sink) -> None:
    hosts_sink.reset()
    conn = open_db(tmp_path / "jobs.sqlite")
    urls = mixed.targets(hosts_sink.port, 8, hosts=4)
    add_jobs(conn, jobs=8, first_due=T, period_s=0, urls=urls)
    poster = Poster(hosts_sink.url)
    try:
        assert run_pass(conn, poster, T + 0.5) == 8  # every answer was a 200
        assert len(poster.conns) == 4  # one keep-alive connection per receiver host
    finally:
        poster.close()
        conn.close()
    assert sorted(a.key.split("@")[0] for a in hosts_sink.records()) == [f"j{i}" for i in range(8)]


def test_the_command_prints_every_arm_and_steeples_ratios() -> None:
    argv = [sys.executable, "-m", "bench.peer", "--size", "0", "--rates", "", "--mixed", "20",
            "--mixed-hosts", "4", "--peers", "naive", "--runs", "1", "--lead", "10",
            "--naive-lead", "2", "--steeple-env", "STEEPLE_TENANT_MAX_IN_FLIGHT=32"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "steeple_env=STEEPLE_TENANT_MAX_IN_FLIGHT=32" in out  # the run says its setting
    title = "mixed 20, 4 hosts, 5–50 ms"
    assert f"== {title}: ratio vs naive (1 runs)" in out
    table = out.split(f"== {title} (medians)", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table[1].split() == ["figure", "steeple", "naive"]
    rows = {line.split()[0]: line.split()[1:] for line in table[2:]}
    for figure in ("all_delivered_s", "lateness_p99_ms", "cpu_ms_per_delivery"):
        assert len(rows[figure]) == 2 and "n/a" not in rows[figure]
    assert rows["delivered"] == ["20", "20"] and rows["lost"] == ["0", "0"]
    ratios = out.split(f"== {title}: ratio vs naive (1 runs)", 1)[1].split("\n\n", 1)[0]
    for figure in ("all_delivered_s_ratio", "lateness_p99_ms_ratio", "cpu_ms_per_delivery_ratio"):
        assert figure in ratios


def test_a_steeple_setting_reaches_the_appliance_and_a_bad_one_is_refused() -> None:
    assert peer.parse_setting("STEEPLE_TENANT_MAX_IN_FLIGHT=32") == (
        "STEEPLE_TENANT_MAX_IN_FLIGHT",
        "32",
    )
    for bad in ("TENANT_MAX_IN_FLIGHT=32", "STEEPLE_TENANT_MAX_IN_FLIGHT"):
        with pytest.raises(argparse.ArgumentTypeError, match="want STEEPLE_NAME=value"):
            peer.parse_setting(bad)
    # Out of the setting's range: the appliance itself refuses to start, so the value
    # reached its process (a setting dropped on the way would run the default).
    argv = [sys.executable, "-m", "bench.peer", "--size", "3", "--rates", "", "--mixed", "0",
            "--peers", "", "--runs", "1", "--lead", "6",
            "--steeple-env", "STEEPLE_TENANT_MAX_IN_FLIGHT=0"]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode != 0
    assert "tenant_max_in_flight" in (done.stdout + done.stderr).lower()
