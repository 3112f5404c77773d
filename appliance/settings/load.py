"""The settings, resolved once at start from (lowest to highest precedence) defaults, a
TOML file, ``STEEPLE_*`` environment variables and command-line flags.

The file is ``--config FILE``, else ``$STEEPLE_CONFIG``, else ``steeple.toml`` in the data
directory when it exists (``steeple init`` writes it there), so a setting chosen once
persists across restarts. The data directory itself: flag, ``STEEPLE_DATA_DIR``, a
config file named explicitly, systemd's ``$STATE_DIRECTORY``, the user data directory.
A secret setting also reads ``STEEPLE_<NAME>_FILE`` (a path) or systemd's
``$CREDENTIALS_DIRECTORY/<name>`` (``LoadCredential=``), after its variable and before the
file: a secret need not sit in an environment block or a config file.

Parsing is strict: a bad value stops the appliance at start with the setting's name. Every
setting is documented in docs/configuration.md (a test keeps the two in step).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from appliance.errors import ConfigError
from appliance.settings import values
from appliance.settings.model import CONFIG_FILENAME, Settings
from appliance.settings.table import SETTINGS, SettingDef


def _from_file(path: Path) -> dict[str, str]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", f"{path} is not valid TOML: {exc}") from None
    known = {d.name for d in SETTINGS}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError("config", f"{path}: unknown settings {', '.join(unknown)}")
    return {k: ",".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in raw.items()}


def _read_secret(source: str, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(source, f"cannot read {path}: {exc.strerror}") from None


def _lookup(
    d: SettingDef,
    overrides: Mapping[str, str],
    environ: Mapping[str, str],
    file_values: Mapping[str, str],
) -> tuple[str, str]:
    """(where the value came from, as the user would name it; the value's text)."""
    if d.name in overrides:
        return "--" + d.name.replace("_", "-"), overrides[d.name]
    if d.env in environ:
        return d.env, environ[d.env]
    if d.secret and f"{d.env}_FILE" in environ:
        return f"{d.env}_FILE", _read_secret(f"{d.env}_FILE", Path(environ[f"{d.env}_FILE"]))
    credential = Path(environ.get("CREDENTIALS_DIRECTORY", "/nonexistent")) / d.name
    if d.secret and "CREDENTIALS_DIRECTORY" in environ and credential.exists():
        return f"credential {d.name}", _read_secret(f"credential {d.name}", credential)
    if d.name in file_values:
        return d.name, file_values[d.name]
    if d.fallback_env and environ.get(d.fallback_env):
        # systemd may list several directories (StateDirectory=a b): the first is ours.
        return d.fallback_env, environ[d.fallback_env].split(":")[0]
    return d.name, d.default()


def _data_dir(
    overrides: Mapping[str, str], environ: Mapping[str, str], file_values: Mapping[str, str]
) -> Path:
    (data_dir,) = (d for d in SETTINGS if d.name == "data_dir")
    source, text = _lookup(data_dir, overrides, environ, file_values)
    return values.path(source, text)


def load_settings(
    *,
    environ: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Resolve every setting. ``overrides`` are command-line values keyed by setting name;
    without ``config_file``, ``steeple.toml`` in the data directory is read if present."""
    overrides = overrides or {}
    file_values = _from_file(config_file) if config_file else {}
    if config_file is None:
        found = _data_dir(overrides, environ, {}) / CONFIG_FILENAME
        if found.is_file():
            config_file, file_values = found, _from_file(found)
            if "data_dir" in file_values:
                raise ConfigError(
                    "data_dir", f"{found} lies in the data directory, so it cannot move it"
                )
    resolved: dict[str, object] = {"config_file": config_file}
    for d in SETTINGS:
        source, text = _lookup(d, overrides, environ, file_values)
        resolved[d.name] = d.parse(source, text)
    return Settings(**resolved)  # type: ignore[arg-type]
