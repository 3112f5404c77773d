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
from appliance.store.events import list_events
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


def make(tmp_path: Path, capsys: pytest.CaptureFixture[str], email: str, role: str) -> str:
    secret = tmp_path / "pw"
    secret.write_text("correct horse battery staple\n")
    code, user, _ = run(
        capsys, "user", "create", email, "--tenant", "acme", "--role", role,
        "--password-file", str(secret), "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 0
    return str(user["id"])


def test_user_list_set_role_remove_and_reset_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["tenant", "create", "acme", *data]) == 0
    capsys.readouterr()
    ada = make(tmp_path, capsys, "ada@acme.example", "owner")
    bob = make(tmp_path, capsys, "bob@acme.example", "viewer")
    code, listed, _ = run(capsys, "user", "list", "--tenant", "acme", *data)
    assert code == 0
    assert [(u["email"], u["role"], u["last_sign_in"]) for u in listed["users"]] == [  # type: ignore[attr-defined]
        ("ada@acme.example", "owner", None),
        ("bob@acme.example", "viewer", None),
    ]
    # The last owner stays: one error line, nothing changes.
    for args in (("set-role", "ada@acme.example", "editor"), ("remove", "ada@acme.example")):
        code, out, err = run(capsys, "user", *args, *data)
        assert code != 0 and out == {} and one_error_line(err)
        assert "ada@acme.example is the last owner of this tenant" in err
    code, changed, _ = run(capsys, "user", "set-role", "bob@acme.example", "owner", *data)
    assert code == 0 and changed == {"id": bob, "email": "bob@acme.example", "role": "owner"}
    code, reset, _ = run(capsys, "user", "reset", "ada@acme.example", "--tenant", "acme", *data)
    assert code == 0 and reset["setup_link_expires_in_seconds"] == 3600
    token = str(reset["setup_link"]).rsplit("/setup/", 1)[1]
    now = SystemClock().now_ms()
    assert read(tmp_path, setup_email, token=token, now=now) == "ada@acme.example"
    code, removed, _ = run(capsys, "user", "remove", "ada@acme.example", *data)
    assert code == 0 and removed == {"id": ada, "email": "ada@acme.example", "removed": True}
    assert read(tmp_path, user_by_email, email="ada@acme.example") is None
    code, out, err = run(capsys, "user", "remove", "bob@acme.example", "--tenant", "other", *data)
    assert code != 0 and one_error_line(err)
    events = read(tmp_path, list_events, tenant_id=str(changed_tenant(tmp_path)), limit=100)
    assert [(str(e.type), e.actor.text() if e.actor else None) for e in events  # type: ignore[attr-defined]
            if str(e.type) in ("user.role_changed", "user.reset", "user.removed")] == [
        ("user.role_changed", "operator:cli"),
        ("user.reset", "operator:cli"),
        ("user.removed", "operator:cli"),
    ]  # fmt: skip


def test_user_list_shows_operators_as_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["admin", "create", "ops@example.com", *data]) == 0
    capsys.readouterr()
    code, listed, _ = run(capsys, "user", "list", *data)
    assert code == 0
    assert [(u["email"], u["role"]) for u in listed["users"]] == [("ops@example.com", "operator")]  # type: ignore[attr-defined]


def changed_tenant(tmp_path: Path) -> object:
    found = read(tmp_path, user_by_email, email="bob@acme.example")
    return found.tenant_id  # type: ignore[attr-defined]
