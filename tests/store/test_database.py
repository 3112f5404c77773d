"""The database seam: migrations, pragmas, transactions, error translation, lock file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import apsw
import pytest
import trio

from appliance.errors import DatabaseLocked, StoreError
from appliance.store.database import Database
from appliance.store.lockfile import LockFile
from appliance.store.migrate import current_version, migrations


def test_open_migrates_and_sets_durable_pragmas(db: Database) -> None:
    def pragmas(conn: apsw.Connection) -> tuple[object, ...]:
        return (
            conn.execute("PRAGMA journal_mode").fetchone()[0],
            conn.execute("PRAGMA synchronous").fetchone()[0],
            current_version(conn),
        )

    assert db.read_now(pragmas) == ("wal", 2, len(migrations()))  # 2 = FULL


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
        conn.execute("INSERT INTO tenants (id, name, created_at) VALUES (?, 'n', 1)", (f"ten_{n}",))

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


def test_lock_file_is_exclusive_across_processes(tmp_path: Path) -> None:
    lock_path = tmp_path / "steeple.db.lock"
    with LockFile(lock_path):
        with pytest.raises(DatabaseLocked, match="another Steeple appliance"):
            LockFile(lock_path).acquire()
        probe = (
            "import sys; from pathlib import Path; from appliance.store.lockfile import LockFile\n"
            "try:\n    LockFile(Path(sys.argv[1])).acquire()\nexcept Exception as e:\n"
            "    print(type(e).__name__); sys.exit(3)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe, str(lock_path)], capture_output=True, text=True
        )
        assert done.returncode == 3 and "DatabaseLocked" in done.stdout
    LockFile(lock_path).acquire()  # released: free again
