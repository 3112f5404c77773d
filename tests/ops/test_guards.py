"""The traps a new operator fell into: the wrong database, duplicate tenant names."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from appliance.cli.main import main
from appliance.errors import StoreError
from appliance.store.infra.database import Database
from appliance.store.infra.migrate import migrations


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[object], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def test_a_missing_data_dir_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "elsewhere"
    for command in (["tenant", "create", "acme"], ["tenant", "list"], ["key", "list"]):
        extra = ["--tenant", "ten_x"] if command[0] == "key" else []
        code, out, err = run(capsys, *command, *extra, "--data-dir", str(missing))
        assert code == 1 and out == []
        assert f"data_dir: {missing} does not exist" in err
        assert "steeple init --data-dir" in err and err.count("\n") == 1
    assert not missing.exists()  # nothing was created


def test_every_command_names_the_database_it_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "tenant", "list", "--data-dir", str(tmp_path))
    assert code == 0 and err == f"steeple: database {tmp_path / 'steeple.db'}\n"


def test_tenant_names_are_unique_ignoring_case_and_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    code, (acme,), _ = run(capsys, "tenant", "create", "acme", *data)
    assert code == 0
    code, out, err = run(capsys, "tenant", "create", " ACME ", *data)
    assert code == 1 and out == []
    assert err.splitlines()[-1] == (
        f"steeple: error: a tenant named 'ACME' exists already ({acme['tenant_id']}):"  # type: ignore[index]
        " choose another name"
    )
    code, (beta,), _ = run(capsys, "tenant", "create", "beta", *data)
    code, listed, _ = run(capsys, "tenant", "list", *data)
    assert code == 0
    assert [(t["id"], t["name"], t["schedules"]) for t in listed] == [  # type: ignore[index]
        (acme["tenant_id"], "acme", 0),  # type: ignore[index]
        (beta["tenant_id"], "beta", 0),  # type: ignore[index]
    ]
    code, _, err = run(capsys, "tenant", "rename", beta["tenant_id"], "Acme", *data)  # type: ignore[index]
    assert code == 1 and "exists already" in err


def _database_at(path: Path, version: int) -> None:
    conn = apsw.Connection(str(path))
    for number, sql in migrations()[:version]:
        conn.execute(sql)
        conn.execute(f"PRAGMA user_version = {number}")
    conn.close()


def test_duplicates_from_before_unique_names_are_refused_by_name_then_renamed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Migration 0011 adds the unique index; a database that already holds duplicates is
    refused naming them (nothing renamed or dropped), and ``tenant rename`` resolves it."""
    db_path = tmp_path / "steeple.db"
    _database_at(db_path, 10)
    conn = apsw.Connection(str(db_path))
    for tenant_id, name in [("ten_a", "acme"), ("ten_b", "Acme"), ("ten_c", "solo")]:
        conn.execute("INSERT INTO tenants VALUES (?, ?, 0)", (tenant_id, name))
    conn.close()

    with pytest.raises(StoreError, match=r"share one: ten_a 'acme', ten_b 'Acme'\. Rename"):
        Database.open(db_path)
    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA user_version").fetchone() == (10,)  # unchanged
    assert conn.execute("SELECT count(*) FROM tenants").fetchone() == (3,)
    conn.close()

    code, _, err = run(capsys, "tenant", "rename", "ten_b", "acme-2", "--data-dir", str(tmp_path))
    assert code == 0, err
    code, listed, _ = run(capsys, "tenant", "list", "--data-dir", str(tmp_path))
    assert [t["name"] for t in listed] == ["acme", "acme-2", "solo"]  # type: ignore[index]
    db = Database.open(db_path)
    assert db.read_now(lambda c: c.execute("PRAGMA user_version").fetchone()) == (
        len(migrations()),
    )
    db.close()
