"""Settings: strict parsing, precedence, and documentation kept true."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.core.addresses import AddressPolicy
from appliance.core.breaker import BreakerConfig
from appliance.errors import ConfigError
from appliance.settings.load import load_settings
from appliance.settings.model import LogLevel
from appliance.settings.table import SETTINGS
from appliance.wiring.runtime import delivery_client, engine_config

DOC = Path(__file__).parent.parent / "docs" / "configuration.md"


def test_every_setting_is_documented_with_its_environment_variable() -> None:
    text = DOC.read_text(encoding="utf-8")
    for setting in SETTINGS:
        assert f"`{setting.name}`" in text, setting.name
        assert f"`{setting.env}" in text, setting.env


def test_precedence_flag_over_environment_over_file(tmp_path: Path) -> None:
    config = tmp_path / "steeple.toml"
    config.write_text('listen = "127.0.0.1:1"\nlog_level = "debug"\ndispatch_concurrency = 4\n')
    env = {"STEEPLE_LISTEN": "127.0.0.1:2", "STEEPLE_DATA_DIR": str(tmp_path)}
    settings = load_settings(environ=env, overrides={"listen": "127.0.0.1:3"}, config_file=config)
    assert settings.listen.port == 3
    assert settings.log_level is LogLevel.DEBUG
    assert settings.dispatch_concurrency == 4
    assert settings.db_path == tmp_path / "steeple.db"
    assert load_settings(environ=env, config_file=config).listen.port == 2


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STEEPLE_LISTEN": "8080"}, "STEEPLE_LISTEN: expected HOST:PORT"),
        ({"STEEPLE_LISTEN": "h:70000"}, "STEEPLE_LISTEN"),
        ({"STEEPLE_DISPATCH_CONCURRENCY": "0"}, "between 1 and 1024"),
        ({"STEEPLE_DISPATCH_CONCURRENCY": "many"}, "expected a whole number"),
        ({"STEEPLE_LOG_LEVEL": "loud"}, "expected one of debug"),
        ({"STEEPLE_TENANT_MAX_IN_FLIGHT": "0"}, "STEEPLE_TENANT_MAX_IN_FLIGHT: must be between"),
        ({"STEEPLE_TENANT_MAX_IN_FLIGHT": "half"}, "expected a whole number"),
        ({"STEEPLE_MAX_SCHEDULES_PER_TENANT": "0"}, "STEEPLE_MAX_SCHEDULES_PER_TENANT"),
    ],
)
def test_bad_values_name_the_setting(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(environ=env)


def test_config_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("colour = 'blue'\n")
    with pytest.raises(ConfigError, match="unknown settings colour"):
        load_settings(environ={}, config_file=bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(environ={}, config_file=tmp_path / "missing.toml")


def test_flag_errors_name_the_flag() -> None:
    with pytest.raises(ConfigError, match="--listen"):
        load_settings(environ={}, overrides={"listen": "x"})


def test_tenant_limits_default_to_half_the_slots_and_a_thousand_schedules() -> None:
    defaults = load_settings(environ={})
    assert defaults.tenant_max_in_flight is None  # auto
    assert defaults.tenant_in_flight_cap == defaults.dispatch_concurrency // 2 == 16
    assert defaults.max_schedules_per_tenant == 1000
    small = load_settings(environ={"STEEPLE_DISPATCH_CONCURRENCY": "1"})
    assert small.tenant_in_flight_cap == 1
    env = {"STEEPLE_TENANT_MAX_IN_FLIGHT": "40", "STEEPLE_DISPATCH_CONCURRENCY": "32"}
    assert load_settings(environ=env).tenant_in_flight_cap == 32  # never above the slots
    env["STEEPLE_TENANT_MAX_IN_FLIGHT"] = "5"
    assert load_settings(environ=env).tenant_in_flight_cap == 5


def test_per_host_concurrency_and_the_breaker_reach_the_engine() -> None:
    defaults = load_settings(environ={})
    assert delivery_client(defaults, AddressPolicy()).pool.max_per_host == 8
    assert engine_config(defaults).dispatch.breaker == BreakerConfig(threshold=10)
    env = {"STEEPLE_MAX_IN_FLIGHT_PER_HOST": "3", "STEEPLE_BREAKER_FAILURES": "4"}
    tuned = load_settings(environ=env)
    assert delivery_client(tuned, AddressPolicy()).pool.max_per_host == 3
    assert engine_config(tuned).dispatch.breaker == BreakerConfig(threshold=4)
    off = load_settings(environ={"STEEPLE_BREAKER_FAILURES": "0"})
    assert engine_config(off).dispatch.breaker is None
    with pytest.raises(ConfigError, match="STEEPLE_MAX_IN_FLIGHT_PER_HOST"):
        load_settings(environ={"STEEPLE_MAX_IN_FLIGHT_PER_HOST": "0"})
