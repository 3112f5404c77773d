"""The settings as a value: one typed :class:`Settings`, what it derives from its fields
(the ``Host`` allow-list, the public URL, the store's paths), and the names of the files in
the data directory. How the values are found and parsed: :mod:`appliance.settings.load`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from appliance.core.hosts import WILDCARDS, default_hosts

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
