"""A backup cannot be stolen through its directory: the copy is written where no other
user can plant a name (a symlink at the old predictable ``.{name}.partial-{pid}`` got a
full copy), a directory others can write is refused, and the result is ``0600``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from appliance.cli.main import main
from appliance.core.instants import parse_instant
from appliance.errors import StoreError
from appliance.ops.doctor import examine
from appliance.settings.load import load_settings
from appliance.store.infra.database import Database
from appliance.store.infra.snapshot import backup_into, take_snapshot, verify_copy
from appliance.store.tenants import create_tenant

T0 = parse_instant("2026-03-02T10:00:00Z")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "steeple.db"
    db = Database.open(path)
    db.write_now(create_tenant, name="acme", now=T0)
    db.close()
    return path


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    path.chmod(0o700)
    return path


def test_a_symlink_planted_at_the_temporary_name_receives_nothing(
    db_path: Path, tmp_path: Path
) -> None:
    folder = _private_dir(tmp_path / "backups")
    stolen = tmp_path / "attacker-can-read"
    stolen.touch(mode=0o644)
    target = folder / "nightly.db"
    os.symlink(stolen, folder / f".{target.name}.partial-{os.getpid()}")
    take_snapshot(db_path, target)
    assert stolen.stat().st_size == 0
    assert verify_copy(target) > 0


def test_a_symlink_at_the_target_name_is_refused(db_path: Path, tmp_path: Path) -> None:
    folder = _private_dir(tmp_path / "backups")
    stolen = tmp_path / "attacker-can-read"
    stolen.touch()
    os.symlink(stolen, folder / "nightly.db")
    with pytest.raises(StoreError, match="exists"):
        take_snapshot(db_path, folder / "nightly.db")
    assert stolen.stat().st_size == 0


def test_the_copy_is_0600_and_leaves_no_temporary_behind(db_path: Path, tmp_path: Path) -> None:
    folder = _private_dir(tmp_path / "backups")
    old_umask = os.umask(0o022)
    try:
        made = backup_into(db_path, folder, now_ms=T0)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(made.path.stat().st_mode) == 0o600
    assert [p.name for p in folder.iterdir()] == [made.path.name]


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_directory_others_can_write_is_refused(db_path: Path, tmp_path: Path, mode: int) -> None:
    folder = _private_dir(tmp_path / "shared")
    folder.chmod(mode)
    with pytest.raises(StoreError, match="writable by other users"):
        take_snapshot(db_path, folder / "nightly.db")
    assert list(folder.iterdir()) == []


def test_a_sticky_shared_directory_is_accepted(db_path: Path, tmp_path: Path) -> None:
    folder = _private_dir(tmp_path / "sticky")
    folder.chmod(0o1777)
    made = take_snapshot(db_path, folder / "nightly.db")
    assert stat.S_IMODE(made.path.stat().st_mode) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_directory_owned_by_another_user_is_refused(db_path: Path, tmp_path: Path) -> None:
    folder = _private_dir(tmp_path / "theirs")
    os.chown(folder, 65534, 65534)
    with pytest.raises(StoreError, match="owned by another user"):
        take_snapshot(db_path, folder / "nightly.db")


def test_steeple_backup_names_the_unsafe_directory(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _private_dir(tmp_path / "shared")
    folder.chmod(0o777)
    code = main(["backup", "--to", str(folder), "--data-dir", str(db_path.parent)])
    err = capsys.readouterr().err
    assert code != 0 and str(folder) in err and "writable by other users" in err
    assert list(folder.iterdir()) == []


def test_doctor_warns_about_an_unsafe_backup_dir(db_path: Path, tmp_path: Path) -> None:
    folder = _private_dir(tmp_path / "shared")
    folder.chmod(0o777)
    settings = load_settings(
        environ={
            "STEEPLE_DATA_DIR": str(db_path.parent),
            "STEEPLE_BACKUP_EVERY_HOURS": "24",
            "STEEPLE_BACKUP_DIR": str(folder),
        }
    )
    (finding,) = [f for f in examine(settings) if "backup_dir" in f.text]
    assert finding.level == "warn" and "writable by other users" in finding.text
    folder.chmod(0o700)
    assert not [f for f in examine(settings) if "backup_dir" in f.text]
