"""bench.replicas --pg-cpus, cheaply: the server pinned to a CPU list (the postmaster, its
children, and a backend forked afterwards), and the gain the CPU figures predict,
computed as bench/replica_scaling.py says (arithmetic on given figures; no timing)."""

from __future__ import annotations

import os

import psycopg
import pytest

from bench import pgserver, replica_scaling
from bench.pgserver import Server
from tests.postgres_cluster import Cluster


def run(rate: float, steeple_ms: float, postgres_ms: float) -> dict[str, float]:
    return {
        "drain_per_s": rate,
        "cpu_steeple_ms_per_delivery": steeple_ms,
        "cpu_postgres_ms_per_delivery": postgres_ms,
        "cpu_total_ms_per_delivery": steeple_ms + postgres_ms,
    }


def test_the_prediction_is_the_least_of_three_ceilings() -> None:
    # One replica at 300/s, 1.5 + 1.0 ms a delivery: three replicas would do 900/s, one
    # PostgreSQL core 1,000/s, two cores 2 / 2.5 ms = 800/s: the box's cores bind.
    one = run(300, 1.5, 1.0)
    assert replica_scaling.predicted_rate(3, 300, one, pg_cores=1, cores=2) == pytest.approx(800)
    # PostgreSQL at 2.5 ms on its one core binds first: 400/s.
    assert replica_scaling.predicted_rate(3, 300, run(300, 0.5, 2.5), pg_cores=1, cores=4) == (
        pytest.approx(400)
    )
    [pair] = replica_scaling.scaling_runs([one], [run(600, 1.6, 1.15)], 3, pg_cores=1, cores=2)
    assert pair["gain_measured"] == pytest.approx(2.0)
    assert pair["gain_predicted"] == pytest.approx(800 / 300)
    assert pair["measured_over_predicted"] == pytest.approx(2.0 / (800 / 300))
    assert pair["gain_predicted_from_own_cpu"] == pytest.approx(2000 / 2.75 / 300)
    assert pair["postgres_cores_busy_x3"] == pytest.approx(0.69)
    assert pair["cores_busy_x1"] == pytest.approx(0.75)


def test_a_bad_cpu_list_is_refused_by_name() -> None:
    assert pgserver.parse_cpus("0") == {0}
    with pytest.raises(ValueError, match="not a CPU list"):
        pgserver.parse_cpus("0-")
    missing = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(ValueError, match=rf"CPUs \[{missing}\] are not usable"):
        pgserver.parse_cpus(str(missing))


@pytest.mark.postgres
def test_pinning_confines_the_server_and_the_backends_it_forks_later(
    pg_cluster: Cluster,
) -> None:
    server = Server(pg_cluster)
    everything = os.sched_getaffinity(server.postmaster_pid)
    try:
        assert pgserver.pin(server, {0}) >= 1  # the postmaster, and each living child
        assert os.sched_getaffinity(server.postmaster_pid) == {0}
        with psycopg.connect(pg_cluster.dsn("postgres")) as conn:  # forked after the pin
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None and os.sched_getaffinity(row[0]) == {0}
    finally:  # the session's server is shared: give it its CPUs back
        pgserver.pin(server, everything)
