"""Scenarios 7 and 8 — the storage layer under power cuts and failing disks.

**7. Crash consistency.** A seeded workload drives the real store functions — the
planner pass (``plan_once``), claims, heartbeats, fenced completions (ok, retry, fail),
the reaper, boot-time reclaim with a new incarnation, and passive WAL checkpoints — one
write transaction each, through :class:`~tests.chaos.faultvfs.FaultVFS`. Before random
I/O operations (seeded) the VFS produces a *crash image*: every file as of its last sync
plus a random subset of the writes issued since (dropped or reordered unsynced writes).
Each image is laid down as a fresh data directory and opened the way the appliance boots
(``Database.open``: migrate + ``quick_check``). Checked on every image:

- integrity: ``Database.open`` succeeds and ``PRAGMA integrity_check`` says ``ok``;
- no acknowledged commit lost, no torn transaction (``synchronous=FULL``): the recovered
  content equals, table for table, the content after the last acknowledged commit, or
  after the one in flight at the cut (committed atomically or not at all);
- cursor and rows consistent: every planned run of a schedule lies before its cursor
  (``scheduled_for < next_fire_at``, or the cursor is NULL), every ``running`` row holds a
  lease and has its open attempt row with the same token, and each run's attempt count
  equals its attempt rows;
- the recovered store works: a planner pass at the next instant commits.

**8. Disk full and read-only disk.** See :func:`test_disk_full_then_space_returns`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.instants import parse_instant
from appliance.core.runs import AttemptOutcome, Transition
from appliance.engine.delivery import Answer
from appliance.engine.reaper import ReaperConfig, reap_once
from appliance.errors import StoreError
from appliance.store.claims import ClaimedRun, claim_runs, renew_leases
from appliance.store.completions import Completion, complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.usecases.reclaim import reclaim_previous
from tests.chaos.faultvfs import FaultVFS, write_image
from tests.chaos.recorder import publish
from tests.engine.conftest import Endpoint, Received, reply, running_engine, stored_events
from tests.store.conftest import ScheduleRow, insert_schedule

if TYPE_CHECKING:
    from tests.chaos.conftest import Profile

T0 = parse_instant("2026-08-06T03:00:00Z")
LEASE_MS = 30_000
CRASHES_PER_SEED = 30


# --- the database as data ---------------------------------------------------------------


def content(conn: apsw.Connection) -> str:
    """A digest of every table's rows (order-independent within a table)."""
    tables = [
        str(name)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        )
    ]
    digest = hashlib.sha256()
    for table in tables:
        rows = sorted(repr(tuple(row)) for row in conn.execute(f'SELECT * FROM "{table}"'))
        digest.update(f"{table}:{len(rows)}:{rows}".encode())
    return digest.hexdigest()


def inconsistencies(conn: apsw.Connection) -> list[str]:
    """Cursor/row and lease/attempt invariants that every committed state satisfies."""
    problems = [
        f"run {rid} at {sched} is not before its schedule's cursor {cursor}"
        for rid, sched, cursor in conn.execute(
            "SELECT r.id, r.scheduled_for, s.next_fire_at FROM job_runs r"
            " JOIN schedules s ON s.id = r.schedule_id"
            " WHERE r.trigger = 'schedule' AND s.next_fire_at IS NOT NULL"
            " AND r.scheduled_for >= s.next_fire_at"
        )
    ]
    problems += [
        f"running run {rid} has no lease or no open attempt with its token"
        for (rid,) in conn.execute(
            "SELECT r.id FROM job_runs r WHERE r.state = 'running' AND (r.lease_token IS NULL"
            " OR NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = r.id"
            " AND a.attempt = r.attempt AND a.lease_token = r.lease_token"
            " AND a.outcome IS NULL))"
        )
    ]
    problems += [
        f"run {rid} counts {attempt} attempts but has {rows} attempt rows"
        for rid, attempt, rows in conn.execute(
            "SELECT r.id, r.attempt, (SELECT COUNT(*) FROM attempts a WHERE a.run_id = r.id)"
            " AS n FROM job_runs r WHERE r.attempt != n"
        )
    ]
    return problems


# --- a workload through the real store functions --------------------------------------


@dataclass
class Workload:
    """One seeded sequence of write transactions, each one acknowledged in turn."""

    db: Database
    rng: random.Random
    now: int = T0
    owner: str = ""
    held: list[ClaimedRun] = field(default_factory=list)  # claimed, not completed yet
    acknowledged: list[str] = field(default_factory=list)  # content after each commit

    def commit(self, fn: Callable[..., Any], **kw: Any) -> Any:
        result = self.db.write_now(fn, **kw)
        self.acknowledged.append(self.db.read_now(content))
        return result

    def boot(self) -> None:
        """A restart: a new incarnation takes back whatever the last one left running."""
        self.owner = self.commit(register_incarnation, pid=os.getpid(), now=self.now)
        self.commit(reclaim_previous, incarnation_id=self.owner, now=self.now)
        self.held = []

    def step(self) -> None:
        rng = self.rng
        self.now += rng.choice((1_000, 5_000, 10_000, 20_000, 45_000))
        self.commit(plan_once, now=self.now, config=PlannerConfig())
        batch = self.commit(
            claim_runs, owner=self.owner, now=self.now, lease_ms=LEASE_MS, limit=rng.randint(0, 4)
        )
        self.held.extend(batch.runs)
        rng.shuffle(self.held)
        for _ in range(rng.randint(0, len(self.held))):
            self.commit(complete_run, run=self.held.pop(), completion=self.outcome(), now=self.now)
        if rng.random() < 0.3:
            self.commit(renew_leases, owner=self.owner, now=self.now, lease_ms=LEASE_MS)
        if rng.random() < 0.2:
            self.commit(reap_once, now=self.now, config=ReaperConfig())
        if rng.random() < 0.2:
            self.db.checkpoint(now_ms=self.now)
        if rng.random() < 0.05:
            self.boot()

    def outcome(self) -> Completion:
        roll = self.rng.random()
        if roll < 0.7:
            transition, outcome, status = Transition.SUCCEED, AttemptOutcome.OK, 200
        elif roll < 0.9:
            transition, outcome, status = Transition.RETRY, AttemptOutcome.RETRYABLE, 503
        else:
            transition, outcome, status = Transition.FAIL, AttemptOutcome.PERMANENT, 410
        return Completion(
            outcome=outcome,
            transition=transition,
            due_at=self.now + 5_000 if transition is Transition.RETRY else None,
            failure_reason="gone" if transition is Transition.FAIL else None,
            http_status=status,
            error=None,
            latency_ms=12,
            response_excerpt="ok",
        )


def setup_store(db: Database) -> None:
    tenant = db.write_now(create_tenant, name="crash", now=T0).tenant_id
    for cron, policy in (
        ("*/10 * * * * *", "all"),
        ("* * * * *", "latest"),
        ("*/30 * * * * *", "skip"),
    ):
        row = ScheduleRow(cron=cron, catchup_policy=policy, next_fire_at=T0)
        db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Crash:
    operation: int  # the I/O operation the power was cut before
    acknowledged: int  # commits acknowledged by then
    unsynced: int  # operations issued since the last sync of their file
    images: dict[str, bytes]


@pytest.fixture
def crash_vfs() -> Iterator[FaultVFS]:
    vfs = FaultVFS("chaos-crash")
    yield vfs
    vfs.unregister()


def run_with_crashes(
    vfs: FaultVFS, path: Path, seed: int, *, steps: int, crashes: int, synchronous: str = "FULL"
) -> tuple[Workload, list[Crash]]:
    """Run the workload for ``steps`` steps, cutting power (virtually) before about
    ``crashes`` random I/O operations. ``synchronous`` other than the appliance's FULL is
    for proving that the check has teeth."""
    rng = random.Random(seed)
    cuts: list[Crash] = []
    db = Database.open(path, threaded=False, vfs=vfs.name)
    setup_store(db)
    work = Workload(db=db, rng=random.Random(seed + 1))
    work.acknowledged.append(db.read_now(content))  # index i: content after i commits
    expected_ops = steps * 65  # measured: about 65 I/O operations per step

    def before_io(vfs: FaultVFS) -> None:
        if rng.random() < crashes / expected_ops:
            cuts.append(
                Crash(
                    operation=vfs.operations,
                    acknowledged=len(work.acknowledged) - 1,
                    unsynced=vfs.unsynced(),
                    images=vfs.crash_image(rng),
                )
            )

    work.boot()
    if synchronous != "FULL":
        db._writer.execute(f"PRAGMA synchronous={synchronous}")  # test-only downgrade
    vfs.before_io = before_io
    try:
        for _ in range(steps):
            work.step()
    finally:
        vfs.before_io = None
        db.close()
    return work, cuts


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    integrity_ok: bool
    lost_acknowledged: bool
    in_flight_survived: bool
    problems: tuple[str, ...]


def recover(crash: Crash, work: Workload, source: Path, target: Path) -> Recovery:
    write_image(crash.images, source, target)
    try:
        db = Database.open(target, threaded=False)  # migrate + quick_check, as at boot
    except StoreError as exc:
        return Recovery(
            integrity_ok=False,
            lost_acknowledged=True,
            in_flight_survived=False,
            problems=(str(exc),),
        )
    try:
        (check,) = db.read_now(lambda c: [str(r[0]) for r in c.execute("PRAGMA integrity_check")])
        found = db.read_now(content)
        states = work.acknowledged[crash.acknowledged : crash.acknowledged + 2]
        problems = db.read_now(inconsistencies)
        db.write_now(plan_once, now=work.now + 60_000, config=PlannerConfig())
        problems += db.read_now(inconsistencies)
    finally:
        db.close()
    return Recovery(
        integrity_ok=check == "ok",
        lost_acknowledged=found not in states,
        in_flight_survived=len(states) == 2 and found == states[1] != states[0],
        problems=tuple(problems),
    )


def test_crash_consistency(crash_vfs: FaultVFS, tmp_path: Path, profile: Profile) -> None:
    steps = profile.pick(fast=60, soak=400)
    chosen = [profile.seed + n for n in range(profile.pick(fast=2, soak=8))]
    crashes = profile.pick(fast=CRASHES_PER_SEED, soak=10 * CRASHES_PER_SEED)
    totals = {"crashes": 0, "unsynced": 0, "survived": 0}
    operations = commits = 0
    for seed in chosen:
        source = tmp_path / f"seed-{seed}" / "steeple.db"
        work, cuts = run_with_crashes(crash_vfs, source, seed, steps=steps, crashes=crashes)
        operations, commits = operations + crash_vfs.operations, commits + len(work.acknowledged)
        crash_vfs.operations = 0
        for n, crash in enumerate(cuts):
            target = tmp_path / f"seed-{seed}" / f"crash-{n}" / "steeple.db"
            result = recover(crash, work, source, target)
            assert result.integrity_ok, (
                f"seed {seed}, cut before I/O #{crash.operation}: {result.problems}"
            )
            assert not result.lost_acknowledged, (
                f"seed {seed}, cut before I/O #{crash.operation}: the recovered content is"
                f" not the state after commit {crash.acknowledged} (nor the one in flight)"
            )
            assert result.problems == (), f"seed {seed}: {result.problems}"
            totals["crashes"] += 1
            totals["unsynced"] += crash.unsynced
            totals["survived"] += result.in_flight_survived
    publish(
        "crash-consistency",
        seeds=len(chosen),
        io_ops=operations,
        commits=commits,
        crashes=totals["crashes"],
        unsynced_ops_at_cuts=totals["unsynced"],
        integrity_failures=0,
        acknowledged_lost=0,
        in_flight_commits_survived=totals["survived"],
        inconsistent=0,
    )
    assert totals["crashes"] >= 20


def test_the_crash_check_catches_unsynced_commits(crash_vfs: FaultVFS, tmp_path: Path) -> None:
    """The same check with ``synchronous=OFF`` (commits never synced) must find lost
    acknowledged commits: the harness can tell durable from lucky."""
    source = tmp_path / "off" / "steeple.db"
    work, cuts = run_with_crashes(crash_vfs, source, 5, steps=30, crashes=15, synchronous="OFF")
    lost = [
        recover(crash, work, source, tmp_path / "off" / f"crash-{n}" / "steeple.db")
        for n, crash in enumerate(cuts)
    ]
    assert any(result.lost_acknowledged or not result.integrity_ok for result in lost)


# --- scenario 8: disk full, read-only disk ----------------------------------------------

MINUTE = 60_000
FILL_AT = T0 + 10 * MINUTE + 1_000  # a delivery of the 03:10 occurrences is in flight
OUTAGE_S = 5 * 60  # until space returns: inside the 1 h catch-up window
RESPONSE_S = 5.0  # the endpoint answers after 5 s, so a delivery is in flight at FILL_AT


@dataclass
class SlowEndpoint:
    """Records (schedule id, scheduled_for, key, wall ms at arrival); answers 200 late."""

    wall: TrioWallClock
    seen: list[tuple[str, str, str, int]] = field(default_factory=list)

    async def respond(self, request: Received, n: int) -> Answer:
        h = request.headers
        self.seen.append(
            (h["X-Schedule-Id"], h["X-Scheduled-For"], h["X-Idempotency-Key"], self.wall.now_ms())
        )
        await trio.sleep(RESPONSE_S)
        return reply(200)


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


def leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in leaves(inner)]
    return [group]


def close(db: Database) -> None:
    """Close while writes may be failing. The last connection's close checkpoints the WAL;
    SQLite ignores a checkpoint that fails there (the WAL stays and is recovered at the
    next open), but apsw re-raises the exception our VFS raised inside it — an artifact of
    a Python VFS, not something a real full disk does."""
    with contextlib.suppress(apsw.FullError, apsw.IOError):
        db.close()


def boot(path: Path, vfs: FaultVFS, now: int) -> tuple[Database, str]:
    """What ``runtime`` does first: open (migrate, quick_check), register, reclaim."""
    db = Database.open(path, threaded=False, vfs=vfs.name)
    try:
        incarnation = db.write_now(register_incarnation, pid=os.getpid(), now=now)
        db.write_now(reclaim_previous, incarnation_id=incarnation, now=now)
    except StoreError:
        close(db)
        raise
    return db, incarnation


def finished(conn: apsw.Connection) -> dict[str, str]:
    """Acknowledged outcomes: every run in a terminal state, and its state."""
    return {
        str(rid): str(state)
        for rid, state in conn.execute(
            "SELECT id, state FROM job_runs WHERE state IN ('succeeded','failed','missed')"
        )
    }


@pytest.mark.parametrize(
    ("failure", "says"),
    [(apsw.FullError, "the disk is full"), (apsw.IOError, "a disk I/O error occurred")],
    ids=["disk-full", "read-only-disk"],
)
async def test_disk_full_then_space_returns(
    autojump_clock: MockClock, tmp_path: Path, failure: type[apsw.Error], says: str
) -> None:
    """Writes start failing while a delivery is in flight. The decided behaviour (the
    dispatcher's docstring; docs/reliability.md): the first failed write — here the
    completion of the in-flight delivery — stops the engine loudly with a
    :class:`StoreError` naming the cause; nothing is claimed or delivered after the failure;
    a restart while the disk is still full refuses at its first write with the same message;
    nothing acknowledged is lost; when space returns a restart reclaims the interrupted run
    (redelivered with the same key) and catches up the outage per the policy."""
    vfs = FaultVFS(f"chaos-{failure.__name__}")
    path = tmp_path / "steeple.db"
    wall = TrioWallClock(T0)
    wall.now_ms()
    endpoint = SlowEndpoint(wall)
    try:
        db = Database.open(path, threaded=False, vfs=vfs.name)
        tenant = db.write_now(create_tenant, name="full", now=T0).tenant_id
        schedules = [
            db.write_now(insert_schedule, tenant_id=tenant, row=ScheduleRow(cron=cron), now=T0)
            for cron in ("* * * * *", "*/15 * * * * *")
        ]
        errors: list[BaseException] = []
        try:
            async with running_engine(db, wall, Endpoint(respond=endpoint.respond)):
                await trio.sleep((FILL_AT - T0) / 1000)
                acknowledged = db.read_now(content)
                before = db.read_now(finished)
                vfs.failing = failure
                await trio.sleep(OUTAGE_S)  # the engine stops itself long before
        except* StoreError as group:
            errors = leaves(group)
        assert errors and all(says in str(error) for error in errors)
        stopped_at = wall.now_ms()
        assert db.read_now(content) == acknowledged  # no write got through
        assert all(at < FILL_AT for *_, at in endpoint.seen)  # nothing new was delivered
        close(db)
        with pytest.raises(StoreError, match=says):  # a restart while still full
            boot(path, vfs, wall.now_ms())
        await trio.sleep(OUTAGE_S - (stopped_at - FILL_AT) / 1000)
        vfs.failing = None  # space returns
        refused = vfs.failed_writes
        db, incarnation = boot(path, vfs, wall.now_ms())
        try:
            restart = wall.now_ms()
            async with running_engine(
                db, wall, Endpoint(respond=endpoint.respond), incarnation_id=incarnation
            ):
                await trio.sleep(10 * 60)
            after = db.read_now(finished)
            lost = [rid for rid, state in before.items() if after.get(rid) != state]
            copies = Counter((sid, sched) for sid, sched, _, _ in endpoint.seen)
            keys = {(sid, sched): key for sid, sched, key, _ in endpoint.seen}
            assert all(keys[(sid, sched)] == key for sid, sched, key, _ in endpoint.seen), (
                "a redelivery with another key"
            )
            for sid in schedules:
                rows = db.read_now(
                    lambda c, sid=sid: [
                        (int(str(sched)), str(state))
                        for sched, state in c.execute(
                            "SELECT scheduled_for, state FROM job_runs WHERE schedule_id = ?"
                            " AND scheduled_for <= ? ORDER BY scheduled_for",
                            (sid, restart),
                        )
                    ]
                )
                assert {state for _, state in rows} == {"succeeded"}  # all caught up
                assert rows[0][0] == T0 and len({s for s, _ in rows}) == len(rows)
            for wire, validator in stored_events(db):
                assert list(validator.iter_errors(wire)) == [], wire
        finally:
            db.close()
    finally:
        vfs.unregister()
    assert lost == []
    publish(
        f"storage-{'full' if failure is apsw.FullError else 'readonly'}",
        error=f'"{says}"',
        writes_refused=refused,
        deliveries_after_failure=0,
        acknowledged_before=len(before),
        acknowledged_lost=len(lost),
        redelivered_same_key=sum(n > 1 for n in copies.values()),
        caught_up=sum(1 for _, sched, _, at in endpoint.seen if at - parse_instant(sched) > MINUTE),
    )
