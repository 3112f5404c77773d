"""Racing processes on one database file (no lock file at store level): the cursor and the
unique index keep materialisation exactly-once; the one-statement claim stays exclusive.

Each racer is a real OS process with its own connections, serving one command at a time
on stdin ("plan NOW", "claim NOW") and answering on stdout. The test decides the order, so
every outcome is asserted, none hoped for: in *ordered* rounds one racer finishes before
the other starts (the second must find nothing left, and each racer leads in turn, so
both do work), and in *concurrent* rounds both get the command at once and SQLite decides
(whoever comes second must still find nothing). Both share one wall timeline, as two
replicas with synchronised clocks would. On PostgreSQL the racers are two replicas on one
database, with no leader: the same assertions hold.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from appliance.core.cron import parse_cron
from appliance.core.jitter import planned_occurrences
from appliance.store.infra.backend import Store
from appliance.store.infra.database import Database
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.store.conftest import T0, MakeSchedule

RACER = """
import sys
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.infra.backend import open_store
from appliance.store.claims import claim_runs

db = open_store(sys.argv[1])
owner = sys.argv[2]
print("ready", flush=True)
for line in sys.stdin:
    verb, now = line.split()
    if verb == "plan":
        result = db.write_now(plan_once, now=int(now), config=PlannerConfig())
        print(result.materialised, flush=True)
    else:
        batch = db.write_now(claim_runs, owner=owner, now=int(now), lease_ms=30_000, limit=7)
        print(" ".join(run.run_id for run in batch.runs), flush=True)
db.close()
"""


class Racer:
    """One racer process: send it a command, read its answer."""

    def __init__(self, target: str, owner: str) -> None:
        self.owner = owner
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RACER, target, owner],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.read() == "ready"

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read() if self.proc.stderr else "racer died"
        return line.strip()

    def close(self) -> None:
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err


@contextmanager
def racers(db: Store) -> Iterator[tuple[Racer, Racer]]:
    """Two racer processes on ``db``'s file or PostgreSQL database."""
    target = str(db.sqlite_file) if isinstance(db, Database) else db.url  # type: ignore[attr-defined]
    pair = (Racer(target, "inc_a"), Racer(target, "inc_b"))
    try:
        yield pair
    finally:
        for racer in pair:
            racer.close()


def round_of(pair: tuple[Racer, Racer], n: int, command: str) -> tuple[list[str], Racer | None]:
    """Round ``n``: ordered (a then b, or b then a) for two rounds of three, concurrent for
    the third. Returns the answers (in pair order) and the racer that went first, if any."""
    if n % 3 == 2:
        for racer in pair:
            racer.send(command)
        return [racer.read() for racer in pair], None
    first, second = pair if n % 3 == 0 else pair[::-1]
    first.send(command)
    answers = {first.owner: first.read()}
    second.send(command)
    answers[second.owner] = second.read()
    return [answers[racer.owner] for racer in pair], first


def expected_occurrences(cron: str, schedule_id: str, jitter: int, until: int) -> list[int]:
    found = []
    spec = parse_cron(cron)
    for occurrence in planned_occurrences(
        spec, schedule_id=schedule_id, jitter_seconds=jitter, after_ms=T0 - 1
    ):
        if occurrence.scheduled_for > until:
            return found
        found.append(occurrence.scheduled_for)
    return found


def count_by_schedule(conn: apsw.Connection) -> dict[str, list[int]]:
    runs: dict[str, list[int]] = {}
    for sid, sched in conn.execute(
        "SELECT schedule_id, scheduled_for FROM job_runs ORDER BY scheduled_for"
    ):
        runs.setdefault(sid, []).append(sched)
    return runs


def test_two_planner_processes_materialise_each_occurrence_once(
    db: Database, make_schedule: MakeSchedule
) -> None:
    specs = [("* * * * * *", 0), ("*/7 * * * * *", 5), ("* * * * *", 0)]
    sids = {
        make_schedule(cron=cron, jitter_seconds=jitter): (cron, jitter) for cron, jitter in specs
    }
    end = T0 + 10 * 60_000
    made = {"inc_a": 0, "inc_b": 0}
    with racers(db) as pair:
        for n, now in enumerate(range(T0, end + 1, 10_000)):
            answers, first = round_of(pair, n, f"plan {now}")
            counts = dict(zip(made, map(int, answers), strict=True))
            assert min(counts.values()) == 0, (n, counts)  # the second found nothing left
            assert max(counts.values()) > 0, (n, counts)  # ten seconds of occurrences
            if first is not None:
                assert counts[first.owner] > 0, (n, counts)  # …and the first made them
            for owner, count in counts.items():
                made[owner] += count

    runs = db.read_now(count_by_schedule)
    horizon = end + PlannerConfig().lookahead_ms  # the last round plans at `end`
    for sid, (cron, jitter) in sids.items():
        assert runs[sid] == expected_occurrences(cron, sid, jitter, horizon)
    total = sum(len(v) for v in runs.values())
    assert sum(made.values()) == total > 600  # each row counted by exactly one racer
    assert all(made.values()), made  # each led some rounds
    # A third, late planner at the same wall time finds nothing left to do.
    assert db.write_now(plan_once, now=end, config=PlannerConfig()).materialised == 0


def test_two_claimer_processes_never_share_a_run(db: Database, make_schedule: MakeSchedule) -> None:
    make_schedule(cron="* * * * * *")
    now = T0 + 600_000
    db.write_now(plan_once, now=now, config=PlannerConfig(max_catchup=1_000))
    due = db.read_now(
        lambda c: c.execute("SELECT COUNT(*) FROM job_runs WHERE due_at <= ?", (now,)).fetchone()[0]
    )
    assert due == 601

    claimed: dict[str, list[str]] = {"inc_a": [], "inc_b": []}
    with racers(db) as pair:
        for n in range(200):
            answers, first = round_of(pair, n, f"claim {now}")
            batches = dict(zip(claimed, (answer.split() for answer in answers), strict=True))
            if first is not None and len(batches[first.owner]) < 7:  # the first emptied it:
                assert sum(map(len, batches.values())) == len(batches[first.owner])  # none left
            for owner, batch in batches.items():
                claimed[owner] += batch
            if not any(batches.values()):
                break

    def summary(conn: apsw.Connection) -> tuple[int, int, int]:
        return conn.execute(
            "SELECT SUM(CASE WHEN state = 'running' THEN 1 ELSE 0 END), MAX(attempt),"
            " (SELECT COUNT(*) FROM attempts)"
            " FROM job_runs"
        ).fetchone()

    running, max_attempt, attempts = db.read_now(summary)
    a, b = set(claimed["inc_a"]), set(claimed["inc_b"])
    assert not a & b  # no run claimed by both
    assert len(a) + len(b) == len(claimed["inc_a"]) + len(claimed["inc_b"]) == due
    assert running == attempts == due and max_attempt == 1  # a second claim shows attempt 2
    assert a and b  # each led some rounds
    assert owners(db) == {**dict.fromkeys(a, "inc_a"), **dict.fromkeys(b, "inc_b")}


def owners(db: Database) -> dict[str, str]:
    def query(conn: apsw.Connection) -> dict[str, str]:
        rows = conn.execute("SELECT id, lease_owner FROM job_runs WHERE state = 'running'")
        return dict(rows)

    return db.read_now(query)
