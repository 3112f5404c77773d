"""``steeple key create|list|revoke``: the operator's side of ``/v1/keys``, on the database
file directly (it works while the appliance runs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from appliance.cli.main import _parser, main
from appliance.core.events import Actor
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from tests.engine.conftest import stored_events


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def test_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["tenant", "create", "acme", *data]) == 0
    tenant = json.loads(capsys.readouterr().out)
    code, (issued,), _ = run(
        capsys, "key", "create", "--tenant", tenant["tenant_id"], "--scope", "read", *data
    )
    assert code == 0 and str(issued["api_key"]).startswith("stk_") and issued["scope"] == "read"
    code, listed, _ = run(capsys, "key", "list", "--tenant", tenant["tenant_id"], *data)
    assert [k["scope"] for k in listed] == ["write", "read"]
    assert all("api_key" not in k for k in listed) and tenant["api_key"] not in str(listed)
    code, (revoked,), _ = run(capsys, "key", "revoke", str(issued["id"]), *data)
    assert code == 0 and revoked["revoked_at"] is not None
    code, listed, _ = run(capsys, "key", "list", "--tenant", tenant["tenant_id"], *data)
    assert [k["id"] for k in listed] == [k["id"] for k in listed if k["scope"] == "write"]
    code, _, err = run(capsys, "key", "revoke", str(listed[0]["id"]), *data)
    assert code == 1 and "last write key" in err and err.startswith("steeple: database ")
    assert err.count("\n") == 2  # which database, then the error


def test_an_unknown_tenant_or_key_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    code, _, err = run(capsys, "key", "create", "--tenant", "ten_nope", "--scope", "write", *data)
    assert code == 1 and err.endswith("\nsteeple: error: no tenant ten_nope\n")
    code, _, err = run(capsys, "key", "revoke", "key_nope", *data)
    assert code == 1 and err.endswith("\nsteeple: error: no API key key_nope\n")


def test_secret_rotate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["tenant", "create", "acme", *data]) == 0
    tenant = json.loads(capsys.readouterr().out)
    code, (rotated,), _ = run(
        capsys, "secret", "rotate", "--tenant", tenant["tenant_id"], "--overlap-seconds", "0", *data
    )
    assert code == 0 and str(rotated["secret"]).startswith("whsec_")
    assert rotated["secret"] != tenant["signing_secret"]
    code, _, err = run(capsys, "secret", "rotate", "--tenant", "ten_nope", *data)
    assert code == 1 and err.endswith("\nsteeple: error: no tenant ten_nope\n")


def test_the_readme_key_and_secret_commands_parse() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"`steeple ((?:key|secret) [^`]+)`", readme.replace("\n   ", " "))
    assert len(commands) == 4, commands
    for command in commands:
        args = command.replace("ten_…", "ten_x").replace("key_…", "key_x").split()
        _parser().parse_args(args)


def test_the_operators_key_secret_and_user_changes_are_events_naming_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["tenant", "create", "acme", *data]) == 0
    tenant_id = json.loads(capsys.readouterr().out)["tenant_id"]
    _, (issued,), _ = run(capsys, "key", "create", "--tenant", tenant_id, "--scope", "read", *data)
    _, (revoked,), _ = run(capsys, "key", "revoke", str(issued["id"]), *data)
    rotate = ["secret", "rotate", "--tenant", tenant_id, "--overlap-seconds", "0"]
    _, (rotated,), _ = run(capsys, *rotate, *data)
    _, (invited,), _ = run(
        capsys, "user", "create", "ada@example.com", "--tenant", tenant_id, *data
    )
    password = tmp_path / "pw"
    password.write_text("correct horse battery staple\n")
    made = ["user", "create", "bob@example.com", "--tenant", "acme", "--password-file"]
    _, (bob,), _ = run(capsys, *made, str(password), *data)
    db = Database.open(tmp_path / "steeple.db")
    try:
        events = db.read_now(list_events, tenant_id=tenant_id, limit=100)
        stored = stored_events(db)
    finally:
        db.close()
    assert [(str(e.type), e.actor) for e in events] == [
        ("api_key.created", Actor.operator()),
        ("api_key.revoked", Actor.operator()),
        ("signing_secret.rotated", Actor.operator()),
        ("user.invited", Actor.operator()),
        ("user.created", Actor.operator()),
    ]
    assert events[0].data == {"key_id": issued["id"], "name": issued["name"], "scope": "read"}
    assert events[3].data["invitation_id"] == invited["invitation_id"]
    assert events[4].data == {"user_id": bob["id"], "email": "bob@example.com", "role": "editor"}
    text = json.dumps([e.data for e in events])
    token = str(invited["setup_link"]).rsplit("/", 1)[1]
    for value in (issued["api_key"], rotated["secret"], token, "correct horse"):
        assert str(value) not in text
    for wire, validator in stored:
        assert [e.message for e in validator.iter_errors(wire)] == [], wire
    assert revoked["revoked_at"] is not None
