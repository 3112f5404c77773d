"""``steeple doctor`` on who may reach the appliance: the Host check turned off, a public
listen without ``public_url``, and an undeclared proxy (requests arrived carrying
``X-Forwarded-For`` while ``trust_proxy`` is 0, as a real appliance records)."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from appliance.ops.doctor import exposure
from appliance.settings.load import load_settings
from appliance.settings.model import Settings
from appliance.store.proxy_seen import ProxySeen, proxy_seen, record_proxy_seen
from tests.e2e.harness import Appliance


def _settings(tmp_path: Path, **env: str) -> Settings:
    return load_settings(environ={"STEEPLE_DATA_DIR": str(tmp_path), **env})


def _warnings(settings: Settings) -> list[str]:
    return [f.text for f in exposure(settings) if f.level == "warn"]


def test_a_loopback_appliance_with_defaults_has_nothing_to_say(tmp_path: Path) -> None:
    record_proxy_seen(tmp_path, ProxySeen(at_ms=0, peer="127.0.0.1"))  # a loopback bind
    assert _warnings(_settings(tmp_path)) == []


def test_a_star_in_allowed_hosts_is_a_warning(tmp_path: Path) -> None:
    (warning,) = _warnings(_settings(tmp_path, STEEPLE_ALLOWED_HOSTS="*"))
    assert "allowed_hosts is *" in warning


def test_a_public_listen_wants_public_url(tmp_path: Path) -> None:
    (warning,) = _warnings(_settings(tmp_path, STEEPLE_LISTEN="0.0.0.0:8080"))
    assert "without public_url" in warning
    (behind,) = _warnings(_settings(tmp_path, STEEPLE_TRUST_PROXY="1"))
    assert "behind a proxy without public_url" in behind
    public = _settings(
        tmp_path, STEEPLE_LISTEN="0.0.0.0:8080", STEEPLE_PUBLIC_URL="https://cron.example.org"
    )
    assert _warnings(public) == []


@pytest.mark.slow
def test_forwarded_requests_without_trust_proxy_are_reported(tmp_path: Path) -> None:
    app = Appliance(tmp_path).start()
    try:
        with httpx.Client(base_url=app.base_url, timeout=10) as client:
            assert client.get("/healthz").status_code == 200
            assert proxy_seen(tmp_path) is None
            client.get("/login", headers={"X-Forwarded-For": "198.51.100.7"})
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    seen = proxy_seen(tmp_path)
    assert seen is not None and seen.peer == "127.0.0.1"
    assert "carried X-Forwarded-For but trust_proxy is 0" in "".join(app.log)
    public = {"STEEPLE_LISTEN": "0.0.0.0:8080", "STEEPLE_PUBLIC_URL": "https://cron.example.org"}
    (warning,) = _warnings(_settings(tmp_path, **public))
    assert "carried X-Forwarded-For" in warning and "trust_proxy is 0" in warning
    assert _warnings(_settings(tmp_path, **public, STEEPLE_TRUST_PROXY="1")) == []
