"""Scenario 11 — restoring an older backup, against the tenant's dedupe horizon.

There is no pruner yet (run history is never deleted), so what can be tested is the other
way old state comes back: **restoring a backup**. The appliance runs in process on
virtual time with three minutely schedules (catch-up policy ``all``, ``latest``,
``skip``). At ``t1`` an online backup is taken with SQLite's backup API (a separate
connection, while the engine runs); the appliance goes on delivering until ``t2``, stops,
the backup is restored over the data directory, and the appliance boots on it (open,
new incarnation, ``reclaim_previous``) and runs on. Backups 30 min old (inside the 1 h
catch-up window) and 3 h old (beyond it) are restored.

The restored cursor sits at ``t1``, so the planner re-plans ``(t1, t2]`` as a downtime.
What is checked and counted:

- **No second row inside the horizon**: one row per occurrence after the restore, and
  every re-planned occurrence gets the *same* run id and idempotency key as the delivery
  the tenant already received (both derive from schedule id and ``scheduled_for``), so a
  tenant deduplicating on the key (``appliance.receiver`` with a ``MemoryDeduper``)
  applies each occurrence exactly once: ``effects == occurrences``.
- **Residual risk, measured**: ``redelivered`` — occurrences delivered before the restore
  and again after it (same key; absorbed by dedupe); ``max_redelivery_age_s`` — how long
  after the first copy the second arrives: at most the backup's age, and re-planning
  never reaches further back than the catch-up window (1 h), so a tenant keeping keys for
  window + retry span dedupes every one; ``ghost_missed`` — occurrences the tenant *did*
  receive that the restored history records as ``missed`` (older than the window, or
  superseded/skipped by the policy): history is wrong, no effect is duplicated;
- **No event sequence number reused**: ``event_seq_reused`` — events written after the
  restore under sequence numbers the lost events had used — is 0: the restore continues
  the sequence above the replaced file's, so a consumer following
  ``GET /v1/events?after=<seq>`` with a cursor from before the restore skips nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.engine.delivery import Answer
from appliance.receiver import MemoryDeduper, Receiver
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.infra.snapshot import put_in_place
from appliance.store.tenants import create_tenant
from appliance.store.usecases.reclaim import reclaim_previous
from tests.chaos.recorder import duplicate_rows, publish
from tests.engine.conftest import Endpoint, Received, reply, running_engine
from tests.store.conftest import T0, ScheduleRow, insert_schedule

MINUTE = 60_000
HOUR = 60 * MINUTE
WINDOW = HOUR  # the default catch-up window
BACKUP_AT = T0 + HOUR
AFTER_RESTORE = 10 * MINUTE
POLICIES = ("all", "latest", "skip")


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


@dataclass
class Tenant:
    """The tenant's endpoint: verifies, deduplicates on the key, applies effects."""

    wall: TrioWallClock
    receiver: Receiver
    copies: list[tuple[str, str, str, int]] = field(default_factory=list)  # run, key, for, ms
    effects: list[str] = field(default_factory=list)

    async def respond(self, request: Received, n: int) -> Answer:
        now = self.wall.now_ms()
        h = request.headers
        self.copies.append((h["X-Run-Id"], h["X-Idempotency-Key"], h["X-Scheduled-For"], now))
        self.receiver.receive(
            request.headers,
            request.content,
            now_s=now // 1000,
            handle=lambda delivery: self.effects.append(delivery.idempotency_key),
        )
        return reply(200)


def backup(path: Path, target: Path) -> None:
    """An online backup through SQLite's backup API, from its own connection."""
    source = apsw.Connection(str(path))
    destination = apsw.Connection(str(target))
    try:
        with destination.backup("main", source, "main") as copy:
            copy.step(-1)
    finally:
        destination.close()
        source.close()


def restore(backup_file: Path, path: Path) -> None:
    """As ``steeple restore`` does: the live files moved aside, the copy put in place with
    its event sequence continued above the replaced file's (store/infra/snapshot.py)."""
    put_in_place(backup_file, path, aside_suffix=".before-restore")


def rows(db: Database) -> list[tuple[str, int, str, str]]:
    """(run id, scheduled_for, key, state) of every run."""

    def query(conn: apsw.Connection) -> list[tuple[str, int, str, str]]:
        return [
            (str(rid), int(sched), str(key), str(state))
            for rid, sched, key, state in conn.execute(
                "SELECT id, scheduled_for, idempotency_key, state FROM job_runs"
            )
        ]

    return db.read_now(query)


def events(db: Database) -> dict[int, str]:
    def query(conn: apsw.Connection) -> dict[int, str]:
        return {int(seq): str(eid) for seq, eid in conn.execute("SELECT seq, id FROM events")}

    return db.read_now(query)


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored:
    occurrences: int
    second_rows: int
    copies: int
    effects: int
    redelivered: int
    max_redelivery_age_s: int
    ghost_missed: int
    event_seq_reused: int


async def restore_after(tmp_path: Path, age: int) -> Restored:
    path = tmp_path / "steeple.db"
    wall = TrioWallClock(T0)
    wall.now_ms()
    db = Database.open(path, threaded=False)
    made = db.write_now(create_tenant, name="restored", now=T0)
    for policy in POLICIES:
        row = ScheduleRow(cron="* * * * *", catchup_policy=policy, next_fire_at=T0)
        db.write_now(insert_schedule, tenant_id=made.tenant_id, row=row, now=T0)
    tenant = Tenant(wall, Receiver(secrets=(made.signing_secret,), deduper=MemoryDeduper()))
    endpoint = Endpoint(respond=tenant.respond)
    async with running_engine(db, wall, endpoint):
        await trio.sleep((BACKUP_AT - T0) / 1000 + 30)  # half a minute past t1
        backup(path, tmp_path / "backup.db")
        await trio.sleep(age / 1000)
    before_events = events(db)
    db.close()
    first_copy = {key: at for _, key, _, at in reversed(tenant.copies)}
    ids_before = {key: rid for rid, key, _, _ in tenant.copies}
    stopped = len(tenant.copies)

    restore(tmp_path / "backup.db", path)
    db = Database.open(path, threaded=False)  # migrate + quick_check, as at boot
    try:
        incarnation = db.write_now(register_incarnation, pid=2, now=wall.now_ms())
        db.write_now(reclaim_previous, incarnation_id=incarnation, now=wall.now_ms())
        async with running_engine(db, wall, endpoint, incarnation_id=incarnation):
            await trio.sleep(AFTER_RESTORE / 1000)
        final = rows(db)
        after_events = events(db)
    finally:
        db.close()

    second_rows = duplicate_rows(path)
    again = [(rid, key, at) for rid, key, _, at in tenant.copies[stopped:] if key in first_copy]
    assert all(ids_before[key] == rid for rid, key, _ in again)  # same run, same key
    received = {key for _, key, _, _ in tenant.copies}
    assert {key for _, _, key, _ in final} >= received  # every delivered key has its row
    assert sorted(tenant.effects) == sorted(received)  # deduplicated: each occurrence once
    return Restored(
        occurrences=len(received),
        second_rows=second_rows,
        copies=len(tenant.copies),
        effects=len(tenant.effects),
        redelivered=len(again),
        max_redelivery_age_s=max(
            ((at - first_copy[key]) // 1000 for _, key, at in again), default=0
        ),
        ghost_missed=sum(state == "missed" and key in received for _, _, key, state in final),
        event_seq_reused=_reused(before_events, after_events),
    )


def _reused(before: Mapping[int, str], after: Mapping[int, str]) -> int:
    """Sequence numbers that named one event before the restore and another after it."""
    return sum(1 for seq, eid in after.items() if seq in before and before[seq] != eid)


async def test_restoring_an_older_backup(autojump_clock: MockClock, tmp_path: Path) -> None:
    inside = await restore_after(tmp_path / "inside", 30 * MINUTE)
    beyond = await restore_after(tmp_path / "beyond", 3 * HOUR)
    assert inside.second_rows == beyond.second_rows == 0
    # Inside the window: every occurrence after the backup is re-planned as catch-up for
    # policy `all`; `latest` and `skip` mark most of them missed.
    assert inside.redelivered >= 30 and inside.max_redelivery_age_s <= 30 * 60 + 60
    # Beyond the window: re-planning reaches back one catch-up window at most.
    assert beyond.redelivered >= 60 and beyond.max_redelivery_age_s <= WINDOW // 1000 + 120
    assert beyond.ghost_missed > inside.ghost_missed
    assert inside.event_seq_reused == beyond.event_seq_reused == 0
    for name, found in (("30min", inside), ("3h", beyond)):
        publish(
            f"backup-restore-{name}",
            occurrences=found.occurrences,
            copies=found.copies,
            effects_after_dedupe=found.effects,
            second_rows=found.second_rows,
            redelivered_same_key=found.redelivered,
            max_redelivery_age_s=found.max_redelivery_age_s,
            ghost_missed=found.ghost_missed,
            event_seq_reused=found.event_seq_reused,
        )
