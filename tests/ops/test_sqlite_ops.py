"""backup, restore, migrate, doctor and status against real database files."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from appliance.cli.main import main
from appliance.core.events import EventType
from appliance.errors import StoreError
from appliance.ops.doctor import clock_finding, filesystem_type
from appliance.store.events import append_event
from appliance.store.infra.database import Database
from appliance.store.infra.lockfile import LockFile
from appliance.store.infra.migrate import migrations
from appliance.store.infra.snapshot import SEQ_GAP, highest_event_seq, last_backup, verify_copy
from appliance.store.tenants import create_tenant

KNOWN = len(migrations())


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    db = Database.open(data / "steeple.db")
    db.write_now(create_tenant, name="acme", now=1_000)
    db.close()
    return data


def _database_at(path: Path, version: int) -> None:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    for number, sql in migrations()[:version]:
        conn.execute(sql)
        conn.execute(f"PRAGMA user_version = {number}")
    conn.execute("INSERT INTO tenants (id, name, created_at) VALUES ('ten_old', 'old', 0)")
    conn.close()


def test_backup_writes_a_checked_copy_and_records_it(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "copy.db"
    code, out, err = run(capsys, "backup", "--to", str(target), "--data-dir", str(data))
    assert code == 0, err
    written = json.loads(out)
    assert written == {"path": str(target), "bytes": target.stat().st_size, "schema": KNOWN}
    assert verify_copy(target) == KNOWN
    assert target.stat().st_mode & 0o077 == 0
    recorded = last_backup(data)
    assert recorded is not None and recorded.path == str(target)
    assert not list(tmp_path.glob(".*partial*"))  # no temporary left behind

    code, _, err = run(capsys, "backup", "--to", str(target), "--data-dir", str(data))
    assert code == 1 and "exists: choose a new name" in err  # never overwritten
    folder = tmp_path / "nightly"
    folder.mkdir()
    code, out, _ = run(capsys, "backup", "--to", str(folder), "--data-dir", str(data))
    assert code == 0 and Path(json.loads(out)["path"]).name.startswith("steeple-20")


def test_restore_refuses_a_bad_copy_or_a_running_appliance(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    code, _, err = run(capsys, "restore", str(junk), "--data-dir", str(data))
    assert code == 1 and "is not a SQLite database" in err
    newer = tmp_path / "newer.db"
    _database_at(newer, KNOWN)
    conn = apsw.Connection(str(newer))
    conn.execute(f"PRAGMA user_version = {KNOWN + 1}")
    conn.close()
    code, _, err = run(capsys, "restore", str(newer), "--data-dir", str(data))
    assert code == 1 and "newer than this Steeple" in err

    good = tmp_path / "good.db"
    assert main(["backup", "--to", str(good), "--data-dir", str(data)]) == 0
    with LockFile(data / "steeple.db.lock"):  # an appliance is running
        code, _, err = run(capsys, "restore", str(good), "--data-dir", str(data))
    assert code == 1 and "stop it first" in err
    assert sorted(p.name for p in data.iterdir() if "before-restore" in p.name) == []


def test_restore_moves_the_live_files_aside_and_explains(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.db"
    assert main(["backup", "--to", str(good), "--data-dir", str(data)]) == 0
    db = Database.open(data / "steeple.db")
    db.write_now(create_tenant, name="after the backup", now=2_000)
    db.close()
    (data / "steeple.db-wal").write_bytes(b"")  # as a stopped appliance may leave them
    (data / "steeple.db-shm").write_bytes(b"")
    before = (data / "steeple.db").read_bytes()
    capsys.readouterr()

    code, _, err = run(capsys, "restore", str(good), "--data-dir", str(data))
    assert code == 0, err
    assert "same X-Idempotency-Key" in err
    aside = sorted(p.name for p in data.iterdir() if "before-restore" in p.name)
    assert sorted(name.split(".before-restore")[0] for name in aside) == [
        "steeple.db",
        "steeple.db-shm",
        "steeple.db-wal",
    ]
    kept = next(p for p in data.iterdir() if p.name.startswith("steeple.db.before-restore"))
    assert kept.read_bytes() == before  # moved, never deleted
    db = Database.open(data / "steeple.db")
    names = db.read_now(lambda c: [r[0] for r in c.execute("SELECT name FROM tenants")])
    db.close()
    assert names == ["acme"]


def _event(path: Path) -> int:
    """Append one event to the file at ``path``; its sequence number."""
    db = Database.open(path)
    try:
        return db.write_now(
            append_event, tenant_id="system", type=EventType.CLOCK_JUMP_DETECTED, now=3_000
        )
    finally:
        db.close()


def test_a_restore_never_hands_out_an_event_sequence_number_again(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Events written after the backup are lost with the restore; their numbers are not
    reused, so a consumer resuming ``?after=`` from before the restore misses nothing."""
    good = tmp_path / "good.db"
    assert main(["backup", "--to", str(good), "--data-dir", str(data)]) == 0
    backed_up = _event(data / "steeple.db") - 1
    lost = max(_event(data / "steeple.db") for _ in range(5))
    assert lost == highest_event_seq(data / "steeple.db")
    assert highest_event_seq(good) == backed_up
    assert run(capsys, "restore", str(good), "--data-dir", str(data))[0] == 0
    assert _event(data / "steeple.db") == lost + 1

    # The replaced file cannot be read (the usual reason to restore): a wide gap instead.
    for path in data.glob("steeple.db*"):
        path.unlink()
    (data / "steeple.db").write_bytes(b"damaged" * 1000)
    assert run(capsys, "restore", str(good), "--data-dir", str(data))[0] == 0
    assert _event(data / "steeple.db") == backed_up + SEQ_GAP + 1


def test_migrate_dry_run_then_with_a_snapshot_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _database_at(tmp_path / "steeple.db", KNOWN - 1)
    code, _, err = run(capsys, "migrate", "--dry-run", "--data-dir", str(tmp_path))
    assert code == 0 and f"schema {KNOWN - 1}; would apply {KNOWN:04d}" in err
    assert not (tmp_path / "backups").exists()
    code, _, err = run(capsys, "migrate", "--data-dir", str(tmp_path))
    assert code == 0 and f"migrated schema {KNOWN - 1} -> {KNOWN}" in err
    (snapshot,) = (tmp_path / "backups").iterdir()
    assert snapshot.name == f"pre-migrate-v{KNOWN - 1}-v{KNOWN}.db"
    assert verify_copy(snapshot) == KNOWN - 1  # the rollback: the schema before
    code, _, err = run(capsys, "migrate", "--data-dir", str(tmp_path))
    assert code == 0 and f"schema {KNOWN} is current" in err


def test_a_database_newer_than_the_code_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _database_at(tmp_path / "steeple.db", KNOWN)
    conn = apsw.Connection(str(tmp_path / "steeple.db"))
    conn.execute(f"PRAGMA user_version = {KNOWN + 3}")
    conn.close()
    code, _, err = run(capsys, "migrate", "--dry-run", "--data-dir", str(tmp_path))
    assert code == 1
    assert err.splitlines()[-1] == (
        f"steeple: error: database schema version {KNOWN + 3} is newer than this Steeple"
        f" (knows {KNOWN}): install the Steeple that wrote it, or restore the pre-migration"
        ' snapshot (docs/operations.md, "Upgrade and rollback")'
    )
    with pytest.raises(StoreError, match="newer than this Steeple"):
        Database.open(tmp_path / "steeple.db")


def test_migrate_refuses_while_an_appliance_runs(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LockFile(data / "steeple.db.lock"):
        code, _, err = run(capsys, "migrate", "--data-dir", str(data))
    assert code == 1 and "another Steeple appliance is running" in err and "stop it" in err


def test_doctor_reports_findings_with_fixes(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "doctor", "--data-dir", str(data))
    lines = out.splitlines()
    assert code == 0, out  # a fresh install: no backup yet is advice, not a failure
    assert lines[0].startswith("ok    steeple ") and "SQLite 3." in lines[0]
    assert any("journal wal" in line and f"schema {KNOWN} of {KNOWN}" in line for line in lines)
    assert "ok    quick_check ok" in lines
    (finding,) = [line for line in lines if line.startswith("warn")]
    assert "no backup yet" in finding and "fix: steeple backup --to" in finding

    assert main(["backup", "--to", str(tmp_path / "b.db"), "--data-dir", str(data)]) == 0
    capsys.readouterr()
    (data / "steeple.db").chmod(0o644)
    code, out, _ = run(capsys, "doctor", "--data-dir", str(data))
    assert code == 1
    (finding,) = [line for line in out.splitlines() if not line.startswith("ok")]
    assert "readable by others (mode 0644)" in finding and "fix:" in finding
    (data / "steeple.db").chmod(0o600)
    code, out, _ = run(capsys, "doctor", "--data-dir", str(data))
    assert code == 0, out


def test_doctor_knows_network_filesystems() -> None:
    mounts = "/dev/sda1 / ext4 rw 0 0\nserver:/export /srv/nfs nfs4 rw 0 0\n"
    assert filesystem_type(Path("/srv/nfs/steeple"), mounts) == "nfs4"
    assert filesystem_type(Path("/var/lib/steeple"), mounts) == "ext4"


def test_status_prints_the_health_figures(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "status", "--json", "--data-dir", str(data))
    shown = json.loads(out)
    assert code == 0
    assert shown["appliance"] == "not running" and shown["tenants"] == 1
    assert shown["schema_version"] == KNOWN and shown["db_bytes"] > 0
    assert shown["runs_due"] == 0 and shown["last_backup"] is None
    # The same figures as /metrics and /admin/health (store.figures.operator.operator_figures).
    assert shown["free_disk_bytes"] > 0 and shown["clock_jumps_24h"] == 0
    assert shown["delivered_per_minute"] == 0 and shown["lateness_p99_seconds"] is None
    assert "last_check" in shown and shown["uptime_seconds"] is None
    with LockFile(data / "steeple.db.lock"):
        code, out, _ = run(capsys, "status", "--data-dir", str(data))
    assert "running (pid " in out and "oldest_due_age_seconds" in out


def test_doctor_reads_the_clock_sync_marker(tmp_path: Path) -> None:
    assert "state unknown" in clock_finding(tmp_path / "missing").text
    (tmp_path / "synchronized").touch()
    assert clock_finding(tmp_path / "synchronized").text == "clock synchronized (systemd-timesyncd)"


def test_status_of_a_data_dir_without_a_database_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "status", "--data-dir", str(tmp_path))
    assert code == 1 and "no database at" in err and "steeple serve" in err
    assert not (tmp_path / "steeple.db").exists()
