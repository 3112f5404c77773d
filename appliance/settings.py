"""One typed settings object, parsed once at start from (lowest to highest precedence)
defaults, a TOML file, ``STEEPLE_*`` environment variables and command-line flags.

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

import enum
import ipaddress
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import platformdirs

from appliance.core.forwarded import MAX_TRUSTED
from appliance.core.hosts import ANY, WILDCARDS, default_hosts
from appliance.errors import ConfigError
from appliance.store.infra.postgres.urls import is_postgres_url

DB_FILENAME = "steeple.db"
CONFIG_FILENAME = "steeple.toml"


class LogFormat(enum.StrEnum):
    AUTO = "auto"  # journal when systemd's $JOURNAL_STREAM is set, else text
    TEXT = "text"
    JSON = "json"
    JOURNAL = "journal"


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
    database: str = ""  # a postgresql:// URL; "": the SQLite file in data_dir
    database_pool_size: int = 8  # connections each replica holds (PostgreSQL)
    replica_poll_ms: int = 1000  # PostgreSQL: the longest a replica sleeps before looking
    database_listen: bool = True  # PostgreSQL: LISTEN for the other replicas' wake-ups
    listen: Listen
    allow_targets: tuple[str, ...]
    dispatch_concurrency: int
    tenant_max_in_flight: int | None  # None: auto, half of dispatch_concurrency
    max_in_flight_per_host: int = 8  # connections (so deliveries) at once to one origin
    max_rate_per_host: int = 0  # requests per second to one origin; 0: no limit
    breaker_failures: int = 10  # consecutive failures that open an origin's breaker; 0: off
    max_schedules_per_tenant: int
    shutdown_grace_seconds: int
    retention_days: int
    replay_rate_per_second: int
    log_level: LogLevel
    log_format: LogFormat
    metrics_allow: tuple[str, ...]
    metrics_token: str
    backup_every_hours: int  # 0: no scheduled backups
    backup_keep: int
    backup_dir: Path | None  # None: backups/ in the data directory
    config_file: Path | None  # the TOML file read, if any
    trust_proxy: int = 0  # reverse proxies in front whose X-Forwarded-* are believed
    allowed_hosts: tuple[str, ...] = ()  # (): default_hosts(listen, public_url)
    public_url: str = ""  # how clients reach the appliance; "": the listen address
    max_streams: int = 256  # open live streams (API and UI) in this process
    max_streams_per_tenant: int = 16
    max_streams_per_key: int = 4
    max_streams_per_session: int = 4

    @property
    def tenant_in_flight_cap(self) -> int:
        """Deliveries one tenant may have in flight: the setting, or half the slots."""
        if self.tenant_max_in_flight is None:
            return max(1, self.dispatch_concurrency // 2)
        return min(self.tenant_max_in_flight, self.dispatch_concurrency)

    @property
    def host_allow_list(self) -> tuple[str, ...]:
        """The ``Host`` names the appliance answers (``*``: any)."""
        return self.allowed_hosts or default_hosts(self.listen.host, self.public_url)

    @property
    def public_base_url(self) -> str:
        """``public_url``, else the listen address (a wildcard shown as loopback)."""
        if self.public_url:
            return self.public_url
        host = "127.0.0.1" if self.listen.host in WILDCARDS else self.listen.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.listen.port}"

    @property
    def backups_path(self) -> Path:
        return self.backup_dir or self.data_dir / "backups"

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILENAME

    @property
    def uses_postgres(self) -> bool:
        return bool(self.database)

    @property
    def store_target(self) -> str | Path:
        """What :func:`appliance.store.infra.backend.open_store` opens: the URL or the file."""
        return self.database or self.db_path

    @property
    def lock_path(self) -> Path:
        return self.data_dir / f"{DB_FILENAME}.lock"


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingDef:
    """One setting: its environment variable, default (as text) and parser. A ``secret``
    also reads ``<env>_FILE`` and ``$CREDENTIALS_DIRECTORY/<name>``; ``fallback_env`` is
    read after the file (systemd's ``$STATE_DIRECTORY``)."""

    name: str
    env: str
    default: Callable[[], str]
    parse: Callable[[str, str], object]
    help: str
    secret: bool = False
    fallback_env: str | None = None


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


def _networks(name: str, text: str) -> tuple[str, ...]:
    """Comma-separated CIDRs (a bare address is a /32 or /128), each checked now."""
    found = _cidrs(name, text)
    for cidr in found:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise ConfigError(name, f"expected CIDRs such as 127.0.0.0/8, got {cidr!r}") from None
    return found


def _optional_path(name: str, text: str) -> Path | None:
    return Path(text).expanduser() if text.strip() else None


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


def _log_format(name: str, text: str) -> LogFormat:
    try:
        return LogFormat(text.lower())
    except ValueError:
        choices = ", ".join(fmt.value for fmt in LogFormat)
        raise ConfigError(name, f"expected one of {choices}, got {text!r}") from None


def _database(name: str, text: str) -> str:
    text = text.strip()
    if text and not is_postgres_url(text):
        raise ConfigError(
            name,
            "expected a postgresql://USER:PASSWORD@HOST:PORT/DBNAME URL, or nothing for"
            " SQLite (the file in data_dir)",
        )
    return text


def _token(name: str, text: str) -> str:
    if text and (len(text) < 16 or not text.isprintable() or " " in text):
        raise ConfigError(name, "a token is at least 16 printable characters, no spaces")
    return text


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


def _trusted_proxies(name: str, text: str) -> int:
    """0 to MAX_TRUSTED proxies; the former boolean spelling: true is 1, false is 0."""
    value = text.strip().lower()
    if value in ("true", "yes"):
        return 1
    if value in ("false", "no", ""):
        return 0
    if not value.isdigit() or int(value) > MAX_TRUSTED:
        raise ConfigError(
            name,
            f"expected the number of reverse proxies in front, 0 to {MAX_TRUSTED} (true is 1,"
            f" false 0), got {text!r}",
        )
    return int(value)


def _hosts(name: str, text: str) -> tuple[str, ...]:
    found = _cidrs(name, text)
    for host in found:
        if host != ANY and (any(c in host for c in "/@?# ") or "*" in host):
            raise ConfigError(
                name, f"expected host names or addresses such as cron.example.org, got {host!r}"
            )
    return found


def _public_url(name: str, text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(name, f"expected a URL such as https://cron.example.org, got {text!r}")
    if parts.path.strip("/") or parts.query or parts.fragment or parts.username:
        raise ConfigError(name, f"expected a scheme, host and port only, got {text!r}")
    try:
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        raise ConfigError(name, f"expected a valid port in {text!r}") from None
    return f"{parts.scheme}://{parts.netloc}"


SETTINGS: tuple[SettingDef, ...] = (
    SettingDef(
        name="data_dir",
        env="STEEPLE_DATA_DIR",
        default=lambda: platformdirs.user_data_dir("steeple"),
        parse=_path,
        help="Directory holding steeple.db (SQLite) and its lock file.",
        fallback_env="STATE_DIRECTORY",
    ),
    SettingDef(
        name="database",
        env="STEEPLE_DATABASE",
        default=lambda: "",
        parse=_database,
        help="A postgresql://USER:PASSWORD@HOST:PORT/DBNAME URL to run as one of several "
        "replicas on PostgreSQL (docs/scale-out.md); empty: the SQLite file in data_dir. "
        "Secret: also read from STEEPLE_DATABASE_FILE or a systemd credential.",
        secret=True,
    ),
    SettingDef(
        name="database_pool_size",
        env="STEEPLE_DATABASE_POOL_SIZE",
        default=lambda: "8",
        parse=_bounded_int(2, 100),
        help="PostgreSQL connections this replica holds (the database needs replicas × "
        "this, plus a few for operators' commands).",
    ),
    SettingDef(
        name="database_listen",
        env="STEEPLE_DATABASE_LISTEN",
        default=lambda: "true",
        parse=_flag,
        help="On PostgreSQL, hold one more connection that LISTENs for the other replicas' "
        "wake-ups (a hint; the poll is the guarantee). false behind PgBouncer in "
        "transaction mode.",
    ),
    SettingDef(
        name="replica_poll_ms",
        env="STEEPLE_REPLICA_POLL_MS",
        default=lambda: "1000",
        parse=_bounded_int(50, 60_000),
        help="On PostgreSQL, the longest a replica's planner and dispatcher sleep before "
        "looking for work another replica created (a schedule, a run, a lease that lapsed).",
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
        name="max_in_flight_per_host",
        env="STEEPLE_MAX_IN_FLIGHT_PER_HOST",
        default=lambda: "8",
        parse=_bounded_int(1, 1024),
        help="Deliveries in flight at once to one origin (scheme, host, port); more wait "
        "for a connection to it.",
    ),
    SettingDef(
        name="max_rate_per_host",
        env="STEEPLE_MAX_RATE_PER_HOST",
        default=lambda: "0",
        parse=_bounded_int(0, 10_000),
        help="Requests per second at most to one origin, started evenly spaced; more wait "
        "their turn. 0: no limit.",
    ),
    SettingDef(
        name="breaker_failures",
        env="STEEPLE_BREAKER_FAILURES",
        default=lambda: "10",
        parse=_bounded_int(0, 1_000_000),
        help="Consecutive failed attempts (no answer, 429 or 5xx) to one origin that open "
        "its circuit breaker: its runs then wait, uncharged, for probes with backoff. "
        "0: no breaker.",
    ),
    SettingDef(
        name="max_schedules_per_tenant",
        env="STEEPLE_MAX_SCHEDULES_PER_TENANT",
        default=lambda: "1000",
        parse=_bounded_int(1, 1_000_000),
        help="Live schedules one tenant may have; a create beyond it is refused (409).",
    ),
    SettingDef(
        name="max_streams",
        env="STEEPLE_MAX_STREAMS",
        default=lambda: "256",
        parse=_bounded_int(1, 100_000),
        help="Live event streams (GET /v1/events/stream and the UI's /events/stream) open "
        "at once in this process; one more is refused (429).",
    ),
    SettingDef(
        name="max_streams_per_tenant",
        env="STEEPLE_MAX_STREAMS_PER_TENANT",
        default=lambda: "16",
        parse=_bounded_int(1, 100_000),
        help="Live event streams one tenant may have open at once, across its keys and "
        "users; one more is refused (429).",
    ),
    SettingDef(
        name="max_streams_per_key",
        env="STEEPLE_MAX_STREAMS_PER_KEY",
        default=lambda: "4",
        parse=_bounded_int(1, 100_000),
        help="Live event streams (GET /v1/events/stream) one API key may have open at "
        "once; one more is refused (429).",
    ),
    SettingDef(
        name="max_streams_per_session",
        env="STEEPLE_MAX_STREAMS_PER_SESSION",
        default=lambda: "4",
        parse=_bounded_int(1, 100_000),
        help="Live event streams (the UI's /events/stream) one signed-in session may have "
        "open at once; one more is refused (429) and the page polls instead.",
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
        name="log_format",
        env="STEEPLE_LOG_FORMAT",
        default=lambda: "auto",
        parse=_log_format,
        help="text (one line each), json (one object per line) or journal (text with "
        "syslog priority prefixes); auto: journal under systemd, else text.",
    ),
    SettingDef(
        name="metrics_allow",
        env="STEEPLE_METRICS_ALLOW",
        default=lambda: "127.0.0.0/8,::1/128",
        parse=_networks,
        help="Comma-separated CIDRs of clients that may read /metrics (loopback only by default).",
    ),
    SettingDef(
        name="metrics_token",
        env="STEEPLE_METRICS_TOKEN",
        default=lambda: "",
        parse=_token,
        help="If set, /metrics also requires 'Authorization: Bearer <token>'. Secret: "
        "also read from STEEPLE_METRICS_TOKEN_FILE or a systemd credential.",
        secret=True,
    ),
    SettingDef(
        name="backup_every_hours",
        env="STEEPLE_BACKUP_EVERY_HOURS",
        default=lambda: "0",
        parse=_bounded_int(0, 8760),
        help="Take a checked backup this often (hours after the last one, whoever took "
        "it); 0: never (run `steeple backup` from cron instead).",
    ),
    SettingDef(
        name="backup_keep",
        env="STEEPLE_BACKUP_KEEP",
        default=lambda: "7",
        parse=_bounded_int(1, 1000),
        help="Scheduled backups kept in backup_dir; older dated ones are deleted.",
    ),
    SettingDef(
        name="backup_dir",
        env="STEEPLE_BACKUP_DIR",
        default=lambda: "",
        parse=_optional_path,
        help="Where scheduled backups go; empty: backups/ in the data directory. Keep it "
        "as private as the data directory: backups hold every signing secret.",
    ),
    SettingDef(
        name="trust_proxy",
        env="STEEPLE_TRUST_PROXY",
        default=lambda: "0",
        parse=_trusted_proxies,
        help="How many reverse proxies stand in front (0 to 8): the client's address is "
        "the X-Forwarded-For entry the outermost of them appended (the N-th from the "
        "right) and X-Forwarded-Proto is believed; 0: neither header is (clients reach "
        "Steeple directly). true means 1.",
    ),
    SettingDef(
        name="allowed_hosts",
        env="STEEPLE_ALLOWED_HOSTS",
        default=lambda: "",
        parse=_hosts,
        help="Comma-separated host names the API, UI and /metrics answer in the Host "
        "header (DNS rebinding defence); empty: the listen address, localhost names and "
        "public_url's host. * turns the check off.",
    ),
    SettingDef(
        name="public_url",
        env="STEEPLE_PUBLIC_URL",
        default=lambda: "",
        parse=_public_url,
        help="The URL clients reach the appliance at (https://cron.example.org): setup "
        "links and the receiver guide are built from it; empty: the listen address.",
    ),
)


def is_list(d: SettingDef) -> bool:
    """Whether the setting is a list (a TOML array in a file, commas elsewhere)."""
    return d.parse in (_cidrs, _networks, _hosts)


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
    return _path(source, text)


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
    values: dict[str, object] = {"config_file": config_file}
    for d in SETTINGS:
        source, text = _lookup(d, overrides, environ, file_values)
        values[d.name] = d.parse(source, text)
    return Settings(**values)  # type: ignore[arg-type]
