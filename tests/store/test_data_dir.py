"""The data directory holds signing secrets: created private, tightened when found open."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.store.infra.database import Database
from appliance.store.infra.datadir import tighten_modes
from appliance.store.tenants import create_tenant
from tests.store.conftest import T0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual login umask (022): without explicit modes, files would be world-readable."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.mark.usefixtures("open_umask")
def test_a_new_database_is_private_with_its_wal_and_shm(tmp_path: Path) -> None:
    path = tmp_path / "data" / "steeple.db"
    db = Database.open(path)
    try:
        db.write_now(create_tenant, name="acme", now=T0)  # a signing secret, in the WAL
        files = [path, path.with_name("steeple.db-wal"), path.with_name("steeple.db-shm")]
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert mode(path.parent) == 0o700
    finally:
        db.close()


def test_an_open_directory_and_files_are_tightened_and_reported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    for name in ("steeple.db", "steeple.db-wal", "steeple.db.lock", "notes.txt"):
        (data / name).touch()
        (data / name).chmod(0o644)

    changes = tighten_modes(data / "steeple.db")

    assert [str(c) for c in changes] == [
        f"{data} 0755 -> 0700",
        f"{data / 'steeple.db'} 0644 -> 0600",
        f"{data / 'steeple.db-wal'} 0644 -> 0600",
        f"{data / 'steeple.db.lock'} 0644 -> 0600",
    ]
    assert mode(data) == 0o700 and mode(data / "steeple.db-wal") == 0o600
    assert mode(data / "notes.txt") == 0o644  # not Steeple's: left alone
    assert tighten_modes(data / "steeple.db") == []  # once tight, nothing to say


def test_a_private_directory_is_left_as_it_is(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "steeple.db").touch(mode=0o400)
    (data / "steeple.db").chmod(0o400)  # stricter than Steeple's own: not loosened
    assert tighten_modes(data / "steeple.db") == []
    assert mode(data / "steeple.db") == 0o400
