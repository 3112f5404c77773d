"""Racing processes on one database file (no lock file at store level): the cursor and the
unique index keep materialisation exactly-once; the one-statement claim stays exclusive.

Each racer is a real OS process with its own connections. They start together behind a
barrier (each says "ready" on stdout, then waits for "go" on stdin) and share one wall
timeline, as two replicas with synchronised clocks would.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

import apsw

from appliance.core.cron import parse_cron
from appliance.core.jitter import planned_occurrences
from appliance.engine.planner import PlannerConfig, plan_once
from appliance.store.database import Database
from tests.store.conftest import T0, MakeSchedule

PLANNER = """
import sys
import time
from pathlib import Path
from appliance.engine.planner import PlannerConfig, plan_once
from appliance.store.database import Database

path, start, end, speed = sys.argv[1], *map(int, sys.argv[2:5])
db = Database.open(Path(path))
print("ready", flush=True)
base_ns = int(sys.stdin.readline().split()[1])
made, now = 0, start
while now < end:
    # The shared wall clock: real time since "go", sped up, the same in both processes.
    now = min(start + (time.time_ns() - base_ns) * speed // 1_000_000, end)
    made += db.write_now(plan_once, now=now, config=PlannerConfig()).materialised
    time.sleep(0.002)  # a real planner waits between passes; SQLite's lock is not fair
db.close()
print(made, flush=True)
"""

CLAIMER = """
import sys
import time
from pathlib import Path
from appliance.store.database import Database
from appliance.store.claims import claim_runs

path, owner, now = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = Database.open(Path(path))
print("ready", flush=True)
sys.stdin.readline()
claimed = 0
while True:
    batch = db.write_now(claim_runs, owner=owner, now=now, lease_ms=30_000, limit=7)
    if not batch.runs:
        break
    claimed += len(batch.runs)
    time.sleep(0.001)  # a real dispatcher delivers between claims
db.close()
print(claimed, flush=True)
"""


def race(script: str, argvs: Sequence[Sequence[str]]) -> list[int]:
    """Run one process per argv behind a barrier; returns the number each printed last."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go = f"go {time.time_ns()}\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(go)
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(int(out.split()[-1]))
    return results


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
    argv = [str(db.path), str(T0), str(end), "300"]  # ten minutes in about two seconds
    made = race(PLANNER, [argv, argv])

    runs = db.read_now(count_by_schedule)
    horizon = end + PlannerConfig().lookahead_ms  # each racer's last pass plans at `end`
    for sid, (cron, jitter) in sids.items():
        assert runs[sid] == expected_occurrences(cron, sid, jitter, horizon)
    total = sum(len(v) for v in runs.values())
    assert sum(made) == total > 600  # each row counted by exactly one racer
    assert all(n > 0 for n in made), made  # both really raced
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

    claimed = race(CLAIMER, [[str(db.path), "inc_a", str(now)], [str(db.path), "inc_b", str(now)]])

    def summary(conn: apsw.Connection) -> tuple[int, int, int]:
        return conn.execute(
            "SELECT SUM(state = 'running'), MAX(attempt), (SELECT COUNT(*) FROM attempts)"
            " FROM job_runs"
        ).fetchone()

    running, max_attempt, attempts = db.read_now(summary)
    assert sum(claimed) == running == attempts == due
    assert max_attempt == 1  # a run claimed twice would show attempt 2
    assert all(n > 0 for n in claimed), claimed  # both really raced
