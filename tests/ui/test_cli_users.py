"""``steeple user create`` and ``steeple admin create``: people of the web UI, created on
the database file (it works while the appliance runs). No default password, ever: a
password file, or a single-use setup link valid for an hour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.cli.main import main
from appliance.clock import SystemClock
from appliance.core.passwords import verify_password
from appliance.store.infra.database import Database
from appliance.store.invitations import setup_email
from appliance.store.users import user_by_email
from tests.e2e.harness import error_lines


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def one_error_line(err: str) -> bool:
    """Besides the line naming the database every command prints, one line: the error."""
    lines = error_lines(err)
    return len(lines) == 1 and lines[0].startswith("steeple: error:")


def read(tmp_path: Path, fn: object, **kw: object) -> object:
    db = Database.open(tmp_path / "steeple.db")
    try:
        return db.read_now(fn, **kw)  # type: ignore[arg-type]
    finally:
        db.close()


def test_user_create_by_tenant_name_with_a_password_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["tenant", "create", "acme", *data]) == 0
    tenant_id = json.loads(capsys.readouterr().out)["tenant_id"]
    secret = tmp_path / "pw"
    secret.write_text("correct horse battery staple\n")
    code, user, _ = run(
        capsys, "user", "create", "Ada@Example.com", "--tenant", "acme", "--role", "owner",
        "--password-file", str(secret), *data,
    )  # fmt: skip
    assert code == 0
    assert user == {
        "id": user["id"], "email": "ada@example.com", "tenant_id": tenant_id,
        "role": "owner", "operator": False,
    }  # fmt: skip
    stored = read(tmp_path, user_by_email, email="ada@example.com")
    assert verify_password(stored.password_hash, "correct horse battery staple")  # type: ignore[attr-defined]
    assert "correct horse" not in str(stored)
    code, _, err = run(
        capsys, "user", "create", "ada@example.com", "--tenant", tenant_id,
        "--password-file", str(secret), *data,
    )  # fmt: skip
    assert code == 1 and "exists already" in err and one_error_line(err)
    code, _, err = run(capsys, "user", "create", "ada@example.com", "--tenant", tenant_id, *data)
    assert code == 1 and "a user of this tenant already" in err and one_error_line(err)


def test_without_a_password_file_a_one_hour_setup_link_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["tenant", "create", "acme", *data]) == 0
    capsys.readouterr()
    code, invited, _ = run(capsys, "user", "create", "bob@example.com", "--tenant", "acme", *data)
    assert code == 0 and invited["role"] == "editor"
    assert str(invited["invitation_id"]).startswith("inv_") and invited["operator"] is False
    assert invited["setup_link_expires_in_seconds"] == 3600
    link = str(invited["setup_link"])
    assert link.startswith("http://127.0.0.1:8080/setup/")
    token = link.rsplit("/", 1)[1]
    now = SystemClock().now_ms()
    assert read(tmp_path, setup_email, token=token, now=now) == "bob@example.com"
    assert read(tmp_path, setup_email, token=token, now=now + 3_600_000) is None
    # An invitation: the account is made when the link is used.
    assert read(tmp_path, user_by_email, email="bob@example.com") is None


def test_admin_create_makes_an_operator_and_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    short = tmp_path / "short"
    short.write_text("short\n")
    code, _, err = run(
        capsys, "admin", "create", "op@example.com", "--password-file", str(short), *data
    )
    assert code == 1 and "12 to 1024 characters" in err
    code, op, _ = run(capsys, "admin", "create", "op@example.com", *data)
    assert code == 0 and op["operator"] is True and op["tenant_id"] is None
    code, _, err = run(capsys, "user", "create", "x@example.com", "--tenant", "nobody", *data)
    assert code == 1 and "no tenant with the id or name 'nobody'" in err
    code, _, err = run(capsys, "user", "create", "not-an-email", "--tenant", "nobody", *data)
    assert code == 1 and one_error_line(err)
    missing = tmp_path / "missing"
    code, _, err = run(
        capsys, "admin", "create", "o2@example.com", "--password-file", str(missing), *data
    )
    assert code == 1 and "cannot read" in err


def test_inviting_an_email_of_another_tenant_prints_what_a_fresh_one_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    for name in ("acme", "globex"):
        assert main(["tenant", "create", name, *data]) == 0
    capsys.readouterr()
    secret = tmp_path / "pw"
    secret.write_text("correct horse battery staple\n")
    made = ["user", "create", "ada@example.com", "--tenant", "acme", "--password-file"]
    assert main([*made, str(secret), *data]) == 0
    capsys.readouterr()
    before = read(tmp_path, user_by_email, email="ada@example.com")
    code, taken, _ = run(capsys, "user", "create", "ada@example.com", "--tenant", "globex", *data)
    fresh_code, fresh, _ = run(
        capsys, "user", "create", "eve@example.com", "--tenant", "globex", *data
    )
    assert (code, fresh_code) == (0, 0) and set(taken) == set(fresh)
    assert taken["tenant_id"] == fresh["tenant_id"] and taken["role"] == fresh["role"]
    assert read(tmp_path, user_by_email, email="ada@example.com") == before
