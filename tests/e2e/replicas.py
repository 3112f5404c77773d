"""Several ``steeple serve`` replicas on one PostgreSQL database (docs/scale-out.md), for
the end-to-end walkthrough (tests/e2e/test_replicas.py) and the multi-replica chaos
scenario (tests/chaos/test_replicas.py).

Which replica sent a delivery is read from the database, never guessed: a claim writes an
``attempts`` row naming the claiming incarnation, and each incarnation row names its
process id. So a delivery's ``(run id, attempt)`` leads to the process that sent it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from tests.chaos.recorder import query
from tests.e2e.harness import Appliance, Delivery

Sent = tuple[str, int]  # (run id, attempt)


def start_all(replicas: Sequence[Appliance], timeout: float = 60) -> None:
    """Start the replicas side by side (each waits for its own start-up line)."""
    failures: list[BaseException] = []

    def start(replica: Appliance) -> None:
        try:
            replica.start(timeout)
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=start, args=(r,), daemon=True) for r in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 10)
    if failures:
        raise failures[0]


def senders(dsn: str) -> dict[Sent, int]:
    """The process id of the replica that claimed each attempt."""
    rows = query(
        dsn,
        "SELECT a.run_id, a.attempt, i.pid FROM attempts a"
        " JOIN incarnations i ON i.id = a.incarnation_id",
    )
    return {(str(run), int(str(n))): int(str(pid)) for run, n, pid in rows}


def sender_of(dsn: str, delivery: Delivery) -> int | None:
    """The process id of the replica that sent ``delivery`` (its claim is committed
    before the request leaves, so the row is there once the request arrived)."""
    return senders(dsn).get((delivery.run_id, delivery.attempt))


def rows_per_second(dsn: str, schedule_id: str) -> dict[int, int]:
    """``scheduled_for`` → how many job_runs rows the occurrence has."""
    rows = query(
        dsn,
        "SELECT scheduled_for, COUNT(*) FROM job_runs WHERE schedule_id = ? GROUP BY scheduled_for",
        (schedule_id,),
    )
    return {int(str(at)): int(str(n)) for at, n in rows}


def one_row_per_second(counts: dict[int, int], *, until_ms: int) -> tuple[list[int], list[int]]:
    """Against an every-second schedule: the seconds from the first planned occurrence to
    the last one up to ``until_ms`` that have no row (lost), and those with more than one."""
    planned = sorted(at for at in counts if at <= until_ms)
    every = range(planned[0], planned[-1] + 1, 1000)
    return [at for at in every if at not in counts], [at for at in every if counts.get(at, 0) > 1]


def first_arrival(
    deliveries: Sequence[Delivery], *, after: float, sent_by: Callable[[Delivery], bool]
) -> float | None:
    """The earliest arrival (monotonic) after ``after`` of a copy ``sent_by`` accepts."""
    later = sorted((d for d in deliveries if d.arrived > after), key=lambda d: d.arrived)
    return next((d.arrived for d in later if sent_by(d)), None)
