"""``steeple init``, the config file in the data directory, the data directory's order of
precedence, and secrets from files (``_FILE``, systemd credentials)."""

from __future__ import annotations

import dataclasses
import os
import stat
import tomllib
from pathlib import Path

import pytest

from appliance.cli.main import main
from appliance.errors import ConfigError
from appliance.ops.init import render
from appliance.settings.load import load_settings
from appliance.settings.table import SETTINGS
from appliance.store.infra.lockfile import LockFile


def test_init_writes_every_setting_commented_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert main(["init", "--data-dir", str(data)]) == 0
    config = data / "steeple.toml"
    assert f"wrote {config}" in capsys.readouterr().err
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    text = config.read_text()
    for setting in SETTINGS:
        assert f"# environment: {setting.env}" in text, setting.name
        if setting.name != "data_dir":
            assert f"# {setting.name} = " in text, setting.name
    assert tomllib.loads(text) == {}  # all commented: the defaults apply
    # The commented defaults, uncommented, are exactly the defaults.
    uncommented = "\n".join(
        line[2:] for line in text.splitlines() if line.startswith("# ") and " = " in line
    )
    defaults = load_settings(environ={"STEEPLE_DATA_DIR": str(data)})
    (data / "steeple.toml").write_text(uncommented)
    reread = load_settings(environ={"STEEPLE_DATA_DIR": str(data)})
    assert reread == dataclasses.replace(defaults, config_file=config)
    config.write_text(text)

    assert main(["init", "--data-dir", str(data)]) == 0  # idempotent
    assert "left as it is" in capsys.readouterr().err and config.read_text() == text
    assert main(["init", "--data-dir", str(data), "--listen", "127.0.0.1:9"]) == 1
    assert "never overwrites it: edit it" in capsys.readouterr().err
    assert config.read_text() == text


def test_init_while_an_appliance_serves_says_it_must_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start's ``serve`` is still running when the walkthrough's ``init`` writes
    the allow-list: the running process read its settings at start and must restart."""
    with LockFile(tmp_path / "steeple.db.lock"):  # what a running `serve` holds
        assert main(["init", "--data-dir", str(tmp_path), "--allow-target", "127.0.0.0/8"]) == 0
    err = capsys.readouterr().err
    assert f"wrote {tmp_path / 'steeple.toml'}" in err
    assert f"an appliance (pid {os.getpid()}) is serving {tmp_path}" in err
    assert "restart it (stop it, then `steeple serve` again)" in err and "next:" not in err
    (tmp_path / "steeple.toml").unlink()
    assert main(["init", "--data-dir", str(tmp_path)]) == 0  # nothing holds the lock now
    err = capsys.readouterr().err
    assert "next: steeple serve" in err and "restart" not in err


def test_choices_made_at_init_persist_for_every_later_command(tmp_path: Path) -> None:
    """The walkthrough's trap: ``serve --allow-target`` once, plain ``serve`` later."""
    assert main(["init", "--data-dir", str(tmp_path), "--allow-target", "127.0.0.0/8"]) == 0
    later = load_settings(environ={}, overrides={"data_dir": str(tmp_path)})
    assert later.allow_targets == ("127.0.0.0/8",)
    assert later.config_file == tmp_path / "steeple.toml"
    # A flag or a variable still wins over the file.
    env = {"STEEPLE_DATA_DIR": str(tmp_path), "STEEPLE_ALLOW_TARGETS": "10.0.0.0/8"}
    assert load_settings(environ=env).allow_targets == ("10.0.0.0/8",)


def test_the_file_in_the_data_dir_cannot_move_it(tmp_path: Path) -> None:
    (tmp_path / "steeple.toml").write_text('data_dir = "/elsewhere"\n')
    with pytest.raises(ConfigError, match="cannot move it"):
        load_settings(environ={"STEEPLE_DATA_DIR": str(tmp_path)})


def test_data_dir_precedence_flag_env_state_directory_default(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    env = {"STEEPLE_DATA_DIR": b, "STATE_DIRECTORY": f"{c}:/var/lib/other"}
    assert load_settings(environ=env, overrides={"data_dir": a}).data_dir == Path(a)
    assert load_settings(environ=env).data_dir == Path(b)
    assert load_settings(environ={"STATE_DIRECTORY": env["STATE_DIRECTORY"]}).data_dir == Path(c)
    assert load_settings(environ={}).data_dir.name == "steeple"  # the user data dir


def test_a_secret_setting_reads_a_file_or_a_systemd_credential(tmp_path: Path) -> None:
    token = "t" * 24
    (tmp_path / "token").write_text(token + "\n")
    env = {"STEEPLE_METRICS_TOKEN_FILE": str(tmp_path / "token")}
    assert load_settings(environ=env).metrics_token == token
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "metrics_token").write_text("c" * 20)
    assert load_settings(environ={"CREDENTIALS_DIRECTORY": str(creds)}).metrics_token == "c" * 20
    both = {**env, "CREDENTIALS_DIRECTORY": str(creds)}
    assert load_settings(environ=both).metrics_token == token  # _FILE before credential
    assert load_settings(environ={**both, "STEEPLE_METRICS_TOKEN": "v" * 16}).metrics_token == (
        "v" * 16
    )
    with pytest.raises(ConfigError, match="STEEPLE_METRICS_TOKEN_FILE: cannot read"):
        load_settings(environ={"STEEPLE_METRICS_TOKEN_FILE": str(tmp_path / "missing")})
    with pytest.raises(ConfigError, match="at least 16"):
        load_settings(environ={"STEEPLE_METRICS_TOKEN": "short"})
    # Only secrets read files: an ordinary setting's _FILE variable means nothing.
    assert load_settings(environ={"STEEPLE_LISTEN_FILE": "/x"}).listen.port == 8080


def test_the_template_is_generated_from_the_table() -> None:
    chosen = render({"listen": "0.0.0.0:80", "allow_targets": "10.0.0.0/8, 192.168.0.0/16"})
    parsed = tomllib.loads(chosen)
    assert parsed == {"listen": "0.0.0.0:80", "allow_targets": ["10.0.0.0/8", "192.168.0.0/16"]}


def test_init_can_write_a_config_elsewhere_for_systemd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    etc = tmp_path / "etc" / "steeple" / "steeple.toml"
    assert main(["init", "--config", str(etc), "--listen", "0.0.0.0:8080"]) == 0
    assert f"wrote {etc}" in capsys.readouterr().err
    assert "# data_dir = " in etc.read_text()  # a file outside the data dir may set it
    settings = load_settings(environ={"STATE_DIRECTORY": str(tmp_path / "state")}, config_file=etc)
    assert str(settings.listen) == "0.0.0.0:8080" and settings.data_dir == tmp_path / "state"
    assert not (tmp_path / "state").exists()  # the service creates it (StateDirectory)


def test_metrics_allow_is_checked_at_start() -> None:
    with pytest.raises(ConfigError, match="STEEPLE_METRICS_ALLOW: expected CIDRs"):
        load_settings(environ={"STEEPLE_METRICS_ALLOW": "10.0.0.0/8,nonsense"})
    assert load_settings(environ={"STEEPLE_METRICS_ALLOW": "10.1.2.3"}).metrics_allow == (
        "10.1.2.3",
    )
