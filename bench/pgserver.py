"""The PostgreSQL server a benchmark measures: a throwaway cluster
(:mod:`tests.postgres_cluster`: ``initdb`` into a temporary directory, run as the
``postgres`` user when we are root), its CPU, its transaction counters, the conflicts its
log reports, and the rows a run left.

- CPU = the postmaster's user + system seconds, those of its children that ended
  (``cutime``/``cstime``) and of its living children (one backend per connection, the
  checkpointer, the WAL writer, autovacuum): :func:`bench.processes.family_cpu_seconds`.
- Transactions = ``pg_stat_database.xact_commit`` / ``xact_rollback`` of one database,
  read after the replicas' backends have ended (a backend flushes its counters when it
  exits).
- Pinning (``bench.replicas --pg-cpus``): :func:`pin` confines the server to a CPU list
  (``sched_setaffinity`` on the postmaster and its children, as ``taskset -p`` would).
- Round trips = the replicas' own count (``steeple_db_round_trips_total`` on their
  ``/metrics``: every wait for the server's answer, ``BEGIN`` and ``COMMIT`` included),
  summed over the replicas (:func:`round_trips`); the two scrapes' own are in it.
- Conflicts = the server log's ``could not serialize access`` and ``deadlock detected``
  errors: each is one transaction ``PgDatabase`` ran again from the start (counted per
  statement, so the hot statement is named).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import child_pids, family_cpu_seconds
from tests.postgres_cluster import Cluster, start_cluster, unavailable

_CONFLICT = re.compile(r"ERROR:\s+(could not serialize access|deadlock detected)")
_STATEMENT = re.compile(r"STATEMENT:\s+(.*)")


@dataclass(frozen=True, slots=True)
class Server:
    cluster: Cluster

    @property
    def postmaster_pid(self) -> int:
        return int((self.cluster.data_dir / "postmaster.pid").read_text().split()[0])

    def cpu_seconds(self) -> float:
        return family_cpu_seconds(self.postmaster_pid)

    def log_offset(self) -> int:
        return self.cluster.log_file.stat().st_size

    def conflicts_since(self, offset: int) -> Counter[str]:
        """The conflicts logged after ``offset``, by the statement that met them (its
        first 90 characters)."""
        with self.cluster.log_file.open("rb") as log:
            log.seek(offset)
            lines = log.read().decode("utf-8", errors="replace").splitlines()
        found: Counter[str] = Counter()
        for i, line in enumerate(lines):
            if _CONFLICT.search(line):
                statement = next(
                    (m.group(1) for m in map(_STATEMENT.search, lines[i + 1 : i + 4]) if m), "?"
                )
                found[" ".join(statement.split())[:90]] += 1
        return found


def parse_cpus(text: str) -> set[int]:
    """A CPU list as ``taskset -c`` reads it (``0``, ``0,2``, ``0-1``) → the CPU numbers;
    ValueError names what is wrong (empty, malformed, or a CPU this machine lacks)."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"not a CPU list: {text!r} (say e.g. 0 or 0-1,3)")
        cpus.update(range(int(first), int(last if dash else first) + 1))
    usable = os.sched_getaffinity(0)
    if not cpus or not cpus <= usable:
        raise ValueError(f"CPUs {sorted(cpus - usable)} are not usable here ({sorted(usable)})")
    return cpus


def pin(server: Server, cpus: set[int]) -> int:
    """Confine the server to ``cpus`` (``sched_setaffinity``, as ``taskset -p`` does): the
    postmaster and its living children; a backend forked later inherits the postmaster's
    mask. The number of processes pinned (a child that ended since it was listed is not)."""
    os.sched_setaffinity(server.postmaster_pid, cpus)
    pinned = 1
    for pid in child_pids(server.postmaster_pid):
        try:
            os.sched_setaffinity(pid, cpus)
        except ProcessLookupError:  # a backend that exited between the listing and now
            continue
        pinned += 1
    return pinned


@contextmanager
def running(workdir: Path) -> Iterator[Server]:
    """A server for the benchmark's lifetime; raises RuntimeError naming what is missing."""
    problem = unavailable()
    if problem:
        raise RuntimeError(f"PostgreSQL unavailable: {problem}")
    cluster = start_cluster(workdir)
    try:
        yield Server(cluster)
    finally:
        cluster.stop()


@contextmanager
def fresh_database(server: Server, hint: str) -> Iterator[str]:
    """An empty database for one run (dropped after it); its DSN."""
    name = server.cluster.next_database_name(hint)
    dsn = server.cluster.create_database(name)
    try:
        yield dsn
    finally:
        server.cluster.drop_database(name)


def transactions(dsn: str) -> tuple[int, int]:
    """(committed, rolled back) transactions of the DSN's database so far."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database"
            " WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def wait_backends_gone(dsn: str, *, timeout: float = 15.0) -> None:
    """Wait until no session but this one uses the database (its counters are flushed)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.05)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rows:
    runs: int
    duplicate_runs: int  # rows beyond the first per (schedule_id, scheduled_for)
    attempts: int
    replicas_delivering: int  # incarnations that made at least one attempt
    busiest_share: float  # the largest share of attempts one incarnation made


def rows(dsn: str) -> Rows:
    """What the run left in the database."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        runs = conn.execute(
            "SELECT count(*), count(DISTINCT (schedule_id, scheduled_for)) FROM job_runs"
        ).fetchone()
        per_incarnation = [
            int(n) for (n,) in conn.execute("SELECT count(*) FROM attempts GROUP BY incarnation_id")
        ]
    assert runs is not None
    attempts = sum(per_incarnation)
    return Rows(
        runs=int(runs[0]),
        duplicate_runs=int(runs[0]) - int(runs[1]),
        attempts=attempts,
        replicas_delivering=len(per_incarnation),
        busiest_share=max(per_incarnation, default=0) / max(attempts, 1),
    )


def round_trips(base_urls: list[str]) -> int:
    """The round trips to the database the replicas at ``base_urls`` made so far."""
    total = 0
    for url in base_urls:
        text = httpx.get(f"{url}/metrics", timeout=10.0).raise_for_status().text
        total += sum(
            int(sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "steeple_db_round_trips_total"
        )
    return total
