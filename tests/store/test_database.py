"""The database seam: migrations, pragmas, transactions, error translation, lock file."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import apsw
import pytest
import trio
import trio.testing

from appliance.errors import DatabaseLocked, StoreError
from appliance.store.infra.database import WRITER_CACHE_KIB, Database
from appliance.store.infra.lockfile import LockFile
from appliance.store.infra.migrate import current_version, migrations


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """This module tests SQLite itself (its file, pragmas or query plans): SQLite only."""
    database = Database.open(tmp_path / "steeple.db")
    yield database
    database.close()


def test_open_migrates_and_sets_durable_pragmas(db: Database) -> None:
    def pragmas(conn: apsw.Connection) -> tuple[object, ...]:
        return (
            conn.execute("PRAGMA journal_mode").fetchone()[0],
            conn.execute("PRAGMA synchronous").fetchone()[0],
            current_version(conn),
        )

    assert db.read_now(pragmas) == ("wal", 2, len(migrations()))  # 2 = FULL


def test_the_writer_has_the_larger_page_cache(db: Database) -> None:
    """The planner's inserts touch random index pages: the writer keeps more of them in
    its cache; readers keep SQLite's default."""

    def cache_kib(conn: apsw.Connection) -> int:
        return -int(conn.execute("PRAGMA cache_size").fetchone()[0])

    assert WRITER_CACHE_KIB >= 32 * 1024
    assert db.write_now(cache_kib) == WRITER_CACHE_KIB
    assert db.read_now(cache_kib) == 2000


def test_reopening_is_idempotent(tmp_path: Path) -> None:
    Database.open(tmp_path / "a.db").close()
    again = Database.open(tmp_path / "a.db")
    assert again.read_now(current_version) == len(migrations())
    again.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "new.db"))
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(StoreError, match="newer than this Steeple"):
        Database.open(tmp_path / "new.db")


def _insert_then_fail(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO tenants (id, name, created_at) VALUES ('ten_x', 'x', 1)")
    raise RuntimeError("boom")


def _count_tenants(conn: apsw.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM tenants").fetchone()[0])


async def test_a_failed_write_rolls_back_whole(db: Database) -> None:
    with pytest.raises(RuntimeError):
        await db.write(_insert_then_fail)
    assert await db.read(_count_tenants) == 0


async def test_apsw_errors_are_translated(db: Database) -> None:
    def duplicate(conn: apsw.Connection) -> None:
        conn.execute("INSERT INTO tenants (id, name, created_at) VALUES ('ten_y', 'y', 1)")
        conn.execute("INSERT INTO tenants (id, name, created_at) VALUES ('ten_y', 'y', 1)")

    with pytest.raises(StoreError, match="database error"):
        await db.write(duplicate)
    assert await db.read(_count_tenants) == 0


async def test_writes_are_serialised_and_reads_run_concurrently(db: Database) -> None:
    def add(conn: apsw.Connection, n: int) -> None:
        conn.execute(
            "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 1)", (f"ten_{n}", f"n{n}")
        )

    async with trio.open_nursery() as nursery:
        for n in range(50):
            nursery.start_soon(db.write, add, n)
            nursery.start_soon(db.read, _count_tenants)
    assert await db.read(_count_tenants) == 50


def test_corruption_is_reported_at_open(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    with pytest.raises(StoreError):
        Database.open(path)


async def test_the_check_beside_the_services_finds_a_damaged_page(tmp_path: Path) -> None:
    """``Database.open(check=False)`` (the appliance's boot) opens a file with a damaged
    table page; :meth:`Database.check` then reports it, naming the file."""
    path = tmp_path / "damaged.db"
    Database.open(path).close()
    conn = apsw.Connection(str(path))
    for n in range(300):
        conn.execute(
            "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 1)",
            (f"t{n}", f"{n}" + "x" * 400),
        )
    conn.close()  # checkpointed into the file
    pages = path.stat().st_size // 4096
    with path.open("r+b") as raw:
        raw.seek((pages - 10) * 4096)
        raw.write(b"\x0d" + b"\xff" * 7)
    db = Database.open(path, check=False)
    try:
        with pytest.raises(StoreError, match="the database check failed") as caught:
            await db.check()
        assert str(path) in str(caught.value)
    finally:
        db.close()
    with pytest.raises(StoreError, match="the database check failed"):
        Database.open(path)  # checked at open: the CLI's and the tests' default


async def test_the_check_passes_on_a_sound_file(db: Database) -> None:
    await db.check()


def test_lock_file_is_exclusive_across_processes(tmp_path: Path) -> None:
    lock_path = tmp_path / "steeple.db.lock"
    with LockFile(lock_path):
        with pytest.raises(DatabaseLocked, match="another Steeple appliance"):
            LockFile(lock_path).acquire()
        probe = (
            "import sys; from pathlib import Path\n"
            "from appliance.store.infra.lockfile import LockFile\n"
            "try:\n    LockFile(Path(sys.argv[1])).acquire()\nexcept Exception as e:\n"
            "    print(type(e).__name__); sys.exit(3)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe, str(lock_path)], capture_output=True, text=True
        )
        assert done.returncode == 3 and "DatabaseLocked" in done.stdout
    LockFile(lock_path).acquire()  # released: free again


def _add_tenant(conn: apsw.Connection, n: int) -> int:
    conn.execute(
        "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 1)", (f"ten_{n}", f"n{n}")
    )
    return n


async def test_writes_that_arrive_together_commit_together(db: Database) -> None:
    results: list[int] = []

    async def one(n: int) -> None:
        results.append(await db.write(_add_tenant, n))

    async with trio.open_nursery() as nursery:
        for n in range(200):
            nursery.start_soon(one, n)
    assert sorted(results) == list(range(200))
    assert await db.read(_count_tenants) == 200
    assert db.grouped_writes == 200
    assert db.group_commits < 50  # most writes shared a COMMIT (one fsync) with others


async def test_a_failing_write_in_a_group_is_rolled_back_alone(db: Database) -> None:
    failures: list[Exception] = []

    async def failing() -> None:
        try:
            await db.write(_insert_then_fail)
        except RuntimeError as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(db.write, _add_tenant, n)
            if n == 10:
                nursery.start_soon(failing)
    assert [str(e) for e in failures] == ["boom"]
    names = await db.read(lambda c: {row[0] for row in c.execute("SELECT id FROM tenants")})
    assert names == {f"ten_{n}" for n in range(20)}  # ten_x of the failing write is gone


async def test_a_write_cancelled_while_queued_never_runs(db: Database) -> None:
    started = trio.Event()

    def slow(conn: apsw.Connection) -> None:
        trio.from_thread.run_sync(started.set)
        conn.execute("INSERT INTO tenants (id, name, created_at) VALUES ('ten_slow', 's', 1)")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(db.write, slow)
        await started.wait()  # the first group is committing; the next write queues
        with trio.move_on_after(0) as scope:
            await db.write(_add_tenant, 99)
        assert scope.cancelled_caught
    await db.write(_add_tenant, 100)  # the next group must not carry the cancelled write
    ids = await db.read(lambda c: {row[0] for row in c.execute("SELECT id FROM tenants")})
    assert ids == {"ten_slow", "ten_100"}


async def test_checkpoints_wait_their_turn_behind_writes(db: Database) -> None:
    """The checkpoint shares the writer connection: running it beside a group commit
    would use one apsw connection from two threads (ThreadingViolationError)."""
    async with trio.open_nursery() as nursery:
        for n in range(100):
            nursery.start_soon(db.write, _add_tenant, n)
            if n % 10 == 0:
                nursery.start_soon(partial(db.checkpoint_wal, now_ms=n))
    assert await db.read(_count_tenants) == 100


async def test_the_writes_of_a_group_wake_together_not_through_the_limiter(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes queued behind a commit are committed by one of them, and the others wake
    when that group is over, without each taking the writer in turn to find it done."""
    started, release = trio.Event(), threading.Event()
    limiter = db._write_limiter
    taken: list[object] = []  # every borrower gives the writer back once
    give_back = limiter.release_on_behalf_of

    def counted(borrower: object) -> None:
        taken.append(borrower)
        give_back(borrower)

    monkeypatch.setattr(limiter, "release_on_behalf_of", counted)

    def holding(conn: apsw.Connection) -> None:
        trio.from_thread.run_sync(started.set)
        release.wait(10)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(db.write, holding)
        await started.wait()
        for n in range(20):
            nursery.start_soon(db.write, _add_tenant, n)
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert await db.read(_count_tenants) == 20
    assert db.group_commits == 2 and len(taken) == 2  # the holder, then one for the 20
