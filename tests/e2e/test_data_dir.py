"""The real appliance keeps its data directory private: it holds every tenant's signing
secrets and receiver credentials in clear (docs/configuration.md, "The data directory")."""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, create_tenant

pytestmark = pytest.mark.slow

FILES = ("steeple.db", "steeple.db-wal", "steeple.db-shm", "steeple.db.lock")


def modes(data: Path) -> dict[str, str]:
    found = {name: data / name for name in (".", *FILES)}
    return {name: f"{stat.S_IMODE(p.stat().st_mode):04o}" for name, p in found.items()}


@pytest.fixture(autouse=True)
def open_umask() -> Iterator[None]:
    """Started from a login shell's umask (022): the appliance must not rely on it."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_a_new_data_dir_is_private_while_serving(tmp_path: Path) -> None:
    data = tmp_path / "data"
    app = Appliance(data).start()
    try:
        found = modes(data)  # the incarnation is written: the WAL and SHM exist
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    assert found == {".": "0700", **dict.fromkeys(FILES, "0600")}
    assert not any("tightened" in line for line in app.log)


def test_an_open_data_dir_is_tightened_at_boot_with_one_log_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    create_tenant(data)
    (data / "steeple.db.lock").touch()
    for name in ("steeple.db", "steeple.db.lock"):
        (data / name).chmod(0o644)
    data.chmod(0o755)  # as an older Steeple left it

    app = Appliance(data).start()
    try:
        found = modes(data)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    assert found == {".": "0700", **dict.fromkeys(FILES, "0600")}
    (line,) = [line for line in app.log if "tightened" in line]
    assert "WARNING" in line and "signing secrets" in line
    for name, before in ((data, "0755"), (data / "steeple.db", "0644")):
        assert f"{name} {before} -> " in line
    assert f"{data / 'steeple.db.lock'} 0644 -> 0600" in line
