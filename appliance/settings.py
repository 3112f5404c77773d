"""One typed settings object, parsed once at start from (lowest to highest precedence)
defaults, an optional TOML file, ``STEEPLE_*`` environment variables and command-line flags.

Parsing is strict: a bad value stops the appliance at start with the setting's name. Every
setting is documented in docs/configuration.md (a test keeps the two in step).
"""

from __future__ import annotations

import enum
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from appliance.errors import ConfigError

DB_FILENAME = "steeple.db"


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Listen:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    data_dir: Path
    listen: Listen
    allow_targets: tuple[str, ...]
    dispatch_concurrency: int
    tenant_max_in_flight: int | None  # None: auto, half of dispatch_concurrency
    max_schedules_per_tenant: int
    shutdown_grace_seconds: int
    retention_days: int
    replay_rate_per_second: int
    log_level: LogLevel
    trust_proxy: bool = False

    @property
    def tenant_in_flight_cap(self) -> int:
        """Deliveries one tenant may have in flight: the setting, or half the slots."""
        if self.tenant_max_in_flight is None:
            return max(1, self.dispatch_concurrency // 2)
        return min(self.tenant_max_in_flight, self.dispatch_concurrency)

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILENAME

    @property
    def lock_path(self) -> Path:
        return self.data_dir / f"{DB_FILENAME}.lock"


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingDef:
    """One setting: its environment variable, default (as text) and parser."""

    name: str
    env: str
    default: Callable[[], str]
    parse: Callable[[str, str], object]
    help: str


def _path(name: str, text: str) -> Path:
    if not text.strip():
        raise ConfigError(name, "must be a directory path, got an empty value")
    return Path(text).expanduser()


def _listen(name: str, text: str) -> Listen:
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(name, f"expected HOST:PORT such as 127.0.0.1:8080, got {text!r}")
    return Listen(host=host, port=int(port_text))


def _cidrs(name: str, text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _bounded_int(low: int, high: int) -> Callable[[str, str], int]:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(name, f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise ConfigError(name, f"must be between {low} and {high}, got {value}")
        return value

    return parse


def _auto_or(parse: Callable[[str, str], int]) -> Callable[[str, str], int | None]:
    """``auto`` (None: derived from other settings) or a value ``parse`` accepts."""

    def parse_auto(name: str, text: str) -> int | None:
        return None if text.strip().lower() == "auto" else parse(name, text)

    return parse_auto


def _log_level(name: str, text: str) -> LogLevel:
    try:
        return LogLevel(text.lower())
    except ValueError:
        choices = ", ".join(level.value for level in LogLevel)
        raise ConfigError(name, f"expected one of {choices}, got {text!r}") from None


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(name, f"expected true or false, got {text!r}")
    return value in ("true", "1", "yes")


SETTINGS: tuple[SettingDef, ...] = (
    SettingDef(
        name="data_dir",
        env="STEEPLE_DATA_DIR",
        default=lambda: platformdirs.user_data_dir("steeple"),
        parse=_path,
        help="Directory holding steeple.db (SQLite) and its lock file.",
    ),
    SettingDef(
        name="listen",
        env="STEEPLE_LISTEN",
        default=lambda: "127.0.0.1:8080",
        parse=_listen,
        help="HOST:PORT the API and UI listen on. Port 0 picks a free port.",
    ),
    SettingDef(
        name="allow_targets",
        env="STEEPLE_ALLOW_TARGETS",
        default=lambda: "",
        parse=_cidrs,
        help="Comma-separated CIDRs that deliveries may reach although not public "
        "(e.g. 127.0.0.0/8 for a local receiver). Cloud metadata addresses never.",
    ),
    SettingDef(
        name="dispatch_concurrency",
        env="STEEPLE_DISPATCH_CONCURRENCY",
        default=lambda: "32",
        parse=_bounded_int(1, 1024),
        help="Deliveries in flight at once.",
    ),
    SettingDef(
        name="tenant_max_in_flight",
        env="STEEPLE_TENANT_MAX_IN_FLIGHT",
        default=lambda: "auto",
        parse=_auto_or(_bounded_int(1, 1024)),
        help="Deliveries one tenant may have in flight at once, so one tenant's slow "
        "receivers cannot hold every slot. auto: half of dispatch_concurrency.",
    ),
    SettingDef(
        name="max_schedules_per_tenant",
        env="STEEPLE_MAX_SCHEDULES_PER_TENANT",
        default=lambda: "1000",
        parse=_bounded_int(1, 1_000_000),
        help="Live schedules one tenant may have; a create beyond it is refused (409).",
    ),
    SettingDef(
        name="shutdown_grace_seconds",
        env="STEEPLE_SHUTDOWN_GRACE_SECONDS",
        default=lambda: "25",
        parse=_bounded_int(0, 300),
        help="On SIGTERM/SIGINT, how long in-flight deliveries may finish.",
    ),
    SettingDef(
        name="retention_days",
        env="STEEPLE_RETENTION_DAYS",
        default=lambda: "30",
        parse=_bounded_int(8, 3650),
        help="Finished runs, their attempts and events older than this are deleted. At "
        "least 8: the dedupe horizon (7-day retry span + catch-up window).",
    ),
    SettingDef(
        name="replay_rate_per_second",
        env="STEEPLE_REPLAY_RATE_PER_SECOND",
        default=lambda: "50",
        parse=_bounded_int(1, 10_000),
        help="How fast the runs of a bulk replay (POST /v1/runs/replay) become due, per "
        "tenant, so a large replay does not hold up the tenant's scheduled runs.",
    ),
    SettingDef(
        name="log_level",
        env="STEEPLE_LOG_LEVEL",
        default=lambda: "info",
        parse=_log_level,
        help="debug, info, warning or error.",
    ),
    SettingDef(
        name="trust_proxy",
        env="STEEPLE_TRUST_PROXY",
        default=lambda: "false",
        parse=_flag,
        help="Behind a TLS-terminating reverse proxy: trust its X-Forwarded-Proto and "
        "X-Forwarded-For (the web UI's Secure cookie, sign-in throttling by address).",
    ),
)


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
    if d.name in file_values:
        return d.name, file_values[d.name]
    return d.name, d.default()


def load_settings(
    *,
    environ: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Resolve every setting. ``overrides`` are command-line values keyed by setting name."""
    file_values = _from_file(config_file) if config_file else {}
    values: dict[str, object] = {}
    for d in SETTINGS:
        source, text = _lookup(d, overrides or {}, environ, file_values)
        values[d.name] = d.parse(source, text)
    return Settings(**values)  # type: ignore[arg-type]
