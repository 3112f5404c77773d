"""The CLI: one line for Steeple's own errors, even from inside the nursery; private files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.cli.main import main, steeple_error_in
from appliance.errors import StoreError


def test_a_steeple_error_from_a_service_is_found_in_the_nursery_group() -> None:
    disk_full = StoreError("the disk is full")
    nested = ExceptionGroup("root", [ExceptionGroup("dispatcher", [disk_full])])
    assert steeple_error_in(nested) is disk_full


def test_other_failures_keep_their_traceback() -> None:
    assert steeple_error_in(ExceptionGroup("root", [StoreError("x"), KeyError("bug")])) is None
    assert steeple_error_in(ExceptionGroup("root", [KeyError("bug")])) is None


def test_commands_run_private_whatever_umask_they_were_started_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``steeple`` sets umask 077 before anything is created: the data directory holds
    signing secrets (docs/configuration.md, "The data directory")."""
    previous = os.umask(0o022)
    try:
        (tmp_path / "data").mkdir()  # 0755: the command takes group and other bits off
        assert main(["tenant", "create", "acme", "--data-dir", str(tmp_path / "data")]) == 0
        in_force = os.umask(0o022)
    finally:
        os.umask(previous)
    assert in_force == 0o077
    assert json.loads(capsys.readouterr().out)["tenant_id"].startswith("ten_")
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "data" / "steeple.db").stat().st_mode) == 0o600


def test_postgresql_without_the_extra_is_one_line_naming_it_and_never_the_password(
    tmp_path: Path,
) -> None:
    """A Steeple installed without ``steeple[postgres]`` (psycopg made unimportable in a
    real subprocess) refuses ``--database postgresql://…`` in one line."""
    script = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from appliance.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    url = "postgresql://ops:hunter2secret@127.0.0.1:5432/steeple"
    done = subprocess.run(
        [sys.executable, "-c", script, "tenant", "create", "acme", "--database", url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "steeple: database postgresql://ops@127.0.0.1:5432/steeple"
    assert len(lines) == 2 and "pip install 'steeple[postgres]'" in lines[1], done.stderr
    assert "hunter2secret" not in done.stderr + done.stdout
