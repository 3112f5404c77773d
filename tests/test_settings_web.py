"""The web-facing settings: ``trust_proxy`` (a number of proxies; the old true/false still
read), ``allowed_hosts`` (derived by default) and ``public_url``; and ``--trust-proxy``."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.cli.main import _parser, _settings
from appliance.errors import ConfigError
from appliance.settings.load import load_settings


def _load(tmp_path: Path, **env: str) -> object:
    return load_settings(environ={"STEEPLE_DATA_DIR": str(tmp_path), **env})


@pytest.mark.parametrize(
    ("text", "proxies"), [("0", 0), ("1", 1), ("3", 3), ("8", 8), ("true", 1), ("false", 0)]
)
def test_trust_proxy_is_a_number_of_proxies(tmp_path: Path, text: str, proxies: int) -> None:
    settings = load_settings(environ={"STEEPLE_DATA_DIR": str(tmp_path)}, overrides={})
    assert settings.trust_proxy == 0
    found = load_settings(environ={"STEEPLE_DATA_DIR": str(tmp_path), "STEEPLE_TRUST_PROXY": text})
    assert found.trust_proxy == proxies


@pytest.mark.parametrize("text", ["9", "-1", "maybe", "1.5"])
def test_other_trust_proxy_values_are_refused_by_name(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="STEEPLE_TRUST_PROXY: expected the number of reverse"):
        _load(tmp_path, STEEPLE_TRUST_PROXY=text)


def test_the_old_boolean_in_a_config_file_still_reads(tmp_path: Path) -> None:
    (tmp_path / "steeple.toml").write_text("trust_proxy = true\n")
    assert load_settings(environ={"STEEPLE_DATA_DIR": str(tmp_path)}).trust_proxy == 1


@pytest.mark.parametrize(
    ("argv", "proxies"), [([], 0), (["--trust-proxy"], 1), (["--trust-proxy", "2"], 2)]
)
def test_the_flag_alone_means_one_proxy(
    tmp_path: Path, argv: list[str], proxies: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEEPLE_TRUST_PROXY", raising=False)
    args = _parser().parse_args(["serve", "--data-dir", str(tmp_path), *argv])
    assert _settings(args).trust_proxy == proxies


def test_allowed_hosts_default_to_the_listen_address_loopback_and_public_url(
    tmp_path: Path,
) -> None:
    plain = load_settings(environ={"STEEPLE_DATA_DIR": str(tmp_path)})
    assert plain.host_allow_list == ("localhost", "127.0.0.1", "::1")
    assert plain.public_base_url == "http://127.0.0.1:8080"
    public = load_settings(
        environ={
            "STEEPLE_DATA_DIR": str(tmp_path),
            "STEEPLE_LISTEN": "0.0.0.0:9000",
            "STEEPLE_PUBLIC_URL": "https://Cron.example.org/",
        }
    )
    assert public.public_base_url == "https://Cron.example.org"
    assert public.host_allow_list[-1] == "cron.example.org"
    given = load_settings(
        environ={"STEEPLE_DATA_DIR": str(tmp_path), "STEEPLE_ALLOWED_HOSTS": "a.example, *"}
    )
    assert given.host_allow_list == ("a.example", "*")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STEEPLE_PUBLIC_URL": "cron.example.org"}, "expected a URL"),
        ({"STEEPLE_PUBLIC_URL": "ftp://cron.example.org"}, "expected a URL"),
        ({"STEEPLE_PUBLIC_URL": "https://cron.example.org/app"}, "scheme, host and port only"),
        ({"STEEPLE_PUBLIC_URL": "https://cron.example.org:99999"}, "valid port"),
        ({"STEEPLE_ALLOWED_HOSTS": "*.example.org"}, "expected host names"),
        ({"STEEPLE_ALLOWED_HOSTS": "http://a.example/"}, "expected host names"),
    ],
)
def test_bad_web_settings_are_refused_by_name(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, **env)
