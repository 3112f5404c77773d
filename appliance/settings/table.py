"""Every setting in one declarative table: its name, environment variable, default (as
text), parser and help. docs/configuration.md documents each one (a test keeps the two in
step); ``steeple init`` writes the commented file from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import platformdirs

from appliance.settings import values


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


SETTINGS: tuple[SettingDef, ...] = (
    SettingDef(
        name="data_dir",
        env="STEEPLE_DATA_DIR",
        default=lambda: platformdirs.user_data_dir("steeple"),
        parse=values.path,
        help="Directory holding steeple.db (SQLite) and its lock file.",
        fallback_env="STATE_DIRECTORY",
    ),
    SettingDef(
        name="database",
        env="STEEPLE_DATABASE",
        default=lambda: "",
        parse=values.database,
        help="A postgresql://USER:PASSWORD@HOST:PORT/DBNAME URL to run as one of several "
        "replicas on PostgreSQL (docs/scale-out.md); empty: the SQLite file in data_dir. "
        "Secret: also read from STEEPLE_DATABASE_FILE or a systemd credential.",
        secret=True,
    ),
    SettingDef(
        name="database_pool_size",
        env="STEEPLE_DATABASE_POOL_SIZE",
        default=lambda: "8",
        parse=values.bounded_int(2, 100),
        help="PostgreSQL connections this replica holds (the database needs replicas × "
        "this, plus a few for operators' commands).",
    ),
    SettingDef(
        name="database_listen",
        env="STEEPLE_DATABASE_LISTEN",
        default=lambda: "true",
        parse=values.flag,
        help="On PostgreSQL, hold one more connection that LISTENs for the other replicas' "
        "wake-ups (a hint; the poll is the guarantee). false behind PgBouncer in "
        "transaction mode.",
    ),
    SettingDef(
        name="replica_poll_ms",
        env="STEEPLE_REPLICA_POLL_MS",
        default=lambda: "1000",
        parse=values.bounded_int(50, 60_000),
        help="On PostgreSQL, the longest a replica's planner and dispatcher sleep before "
        "looking for work another replica created (a schedule, a run, a lease that lapsed).",
    ),
    SettingDef(
        name="listen",
        env="STEEPLE_LISTEN",
        default=lambda: "127.0.0.1:8080",
        parse=values.listen,
        help="HOST:PORT the API and UI listen on. Port 0 picks a free port.",
    ),
    SettingDef(
        name="allow_targets",
        env="STEEPLE_ALLOW_TARGETS",
        default=lambda: "",
        parse=values.cidrs,
        help="Comma-separated CIDRs that deliveries may reach although not public "
        "(e.g. 127.0.0.0/8 for a local receiver). Cloud metadata addresses never.",
    ),
    SettingDef(
        name="dispatch_concurrency",
        env="STEEPLE_DISPATCH_CONCURRENCY",
        default=lambda: "32",
        parse=values.bounded_int(1, 1024),
        help="Deliveries in flight at once.",
    ),
    SettingDef(
        name="tenant_max_in_flight",
        env="STEEPLE_TENANT_MAX_IN_FLIGHT",
        default=lambda: "auto",
        parse=values.auto_or(values.bounded_int(1, 1024)),
        help="Deliveries one tenant may have in flight at once, so one tenant's slow "
        "receivers cannot hold every slot. auto: half of dispatch_concurrency.",
    ),
    SettingDef(
        name="max_in_flight_per_host",
        env="STEEPLE_MAX_IN_FLIGHT_PER_HOST",
        default=lambda: "8",
        parse=values.bounded_int(1, 1024),
        help="Deliveries in flight at once to one origin (scheme, host, port); more wait "
        "for a connection to it.",
    ),
    SettingDef(
        name="max_rate_per_host",
        env="STEEPLE_MAX_RATE_PER_HOST",
        default=lambda: "0",
        parse=values.bounded_int(0, 10_000),
        help="Requests per second at most to one origin, started evenly spaced; more wait "
        "their turn. 0: no limit.",
    ),
    SettingDef(
        name="breaker_failures",
        env="STEEPLE_BREAKER_FAILURES",
        default=lambda: "10",
        parse=values.bounded_int(0, 1_000_000),
        help="Consecutive failed attempts (no answer, 429 or 5xx) to one origin that open "
        "its circuit breaker: its runs then wait, uncharged, for probes with backoff. "
        "0: no breaker.",
    ),
    SettingDef(
        name="max_schedules_per_tenant",
        env="STEEPLE_MAX_SCHEDULES_PER_TENANT",
        default=lambda: "1000",
        parse=values.bounded_int(1, 1_000_000),
        help="Live schedules one tenant may have; a create beyond it is refused (409).",
    ),
    SettingDef(
        name="max_streams",
        env="STEEPLE_MAX_STREAMS",
        default=lambda: "256",
        parse=values.bounded_int(1, 100_000),
        help="Live event streams (GET /v1/events/stream and the UI's /events/stream) open "
        "at once in this process; one more is refused (429).",
    ),
    SettingDef(
        name="max_streams_per_tenant",
        env="STEEPLE_MAX_STREAMS_PER_TENANT",
        default=lambda: "16",
        parse=values.bounded_int(1, 100_000),
        help="Live event streams one tenant may have open at once, across its keys and "
        "users; one more is refused (429).",
    ),
    SettingDef(
        name="max_streams_per_key",
        env="STEEPLE_MAX_STREAMS_PER_KEY",
        default=lambda: "4",
        parse=values.bounded_int(1, 100_000),
        help="Live event streams (GET /v1/events/stream) one API key may have open at "
        "once; one more is refused (429).",
    ),
    SettingDef(
        name="max_streams_per_session",
        env="STEEPLE_MAX_STREAMS_PER_SESSION",
        default=lambda: "4",
        parse=values.bounded_int(1, 100_000),
        help="Live event streams (the UI's /events/stream) one signed-in session may have "
        "open at once; one more is refused (429) and the page polls instead.",
    ),
    SettingDef(
        name="shutdown_grace_seconds",
        env="STEEPLE_SHUTDOWN_GRACE_SECONDS",
        default=lambda: "25",
        parse=values.bounded_int(0, 300),
        help="On SIGTERM/SIGINT, how long in-flight deliveries may finish.",
    ),
    SettingDef(
        name="retention_days",
        env="STEEPLE_RETENTION_DAYS",
        default=lambda: "30",
        parse=values.bounded_int(8, 3650),
        help="Finished runs, their attempts and events older than this are deleted. At "
        "least 8: the dedupe horizon (7-day retry span + catch-up window).",
    ),
    SettingDef(
        name="replay_rate_per_second",
        env="STEEPLE_REPLAY_RATE_PER_SECOND",
        default=lambda: "50",
        parse=values.bounded_int(1, 10_000),
        help="How fast the runs of a bulk replay (POST /v1/runs/replay) become due, per "
        "tenant, so a large replay does not hold up the tenant's scheduled runs.",
    ),
    SettingDef(
        name="log_level",
        env="STEEPLE_LOG_LEVEL",
        default=lambda: "info",
        parse=values.log_level,
        help="debug, info, warning or error.",
    ),
    SettingDef(
        name="log_format",
        env="STEEPLE_LOG_FORMAT",
        default=lambda: "auto",
        parse=values.log_format,
        help="text (one line each), json (one object per line) or journal (text with "
        "syslog priority prefixes); auto: journal under systemd, else text.",
    ),
    SettingDef(
        name="metrics_allow",
        env="STEEPLE_METRICS_ALLOW",
        default=lambda: "127.0.0.0/8,::1/128",
        parse=values.networks,
        help="Comma-separated CIDRs of clients that may read /metrics (loopback only by default).",
    ),
    SettingDef(
        name="metrics_token",
        env="STEEPLE_METRICS_TOKEN",
        default=lambda: "",
        parse=values.token,
        help="If set, /metrics also requires 'Authorization: Bearer <token>'. Secret: "
        "also read from STEEPLE_METRICS_TOKEN_FILE or a systemd credential.",
        secret=True,
    ),
    SettingDef(
        name="backup_every_hours",
        env="STEEPLE_BACKUP_EVERY_HOURS",
        default=lambda: "0",
        parse=values.bounded_int(0, 8760),
        help="Take a checked backup this often (hours after the last one, whoever took "
        "it); 0: never (run `steeple backup` from cron instead).",
    ),
    SettingDef(
        name="backup_keep",
        env="STEEPLE_BACKUP_KEEP",
        default=lambda: "7",
        parse=values.bounded_int(1, 1000),
        help="Scheduled backups kept in backup_dir; older dated ones are deleted.",
    ),
    SettingDef(
        name="backup_dir",
        env="STEEPLE_BACKUP_DIR",
        default=lambda: "",
        parse=values.optional_path,
        help="Where scheduled backups go; empty: backups/ in the data directory. Keep it "
        "as private as the data directory: backups hold every signing secret.",
    ),
    SettingDef(
        name="trust_proxy",
        env="STEEPLE_TRUST_PROXY",
        default=lambda: "0",
        parse=values.trusted_proxies,
        help="How many reverse proxies stand in front (0 to 8): the client's address is "
        "the X-Forwarded-For entry the outermost of them appended (the N-th from the "
        "right) and X-Forwarded-Proto is believed; 0: neither header is (clients reach "
        "Steeple directly). true means 1.",
    ),
    SettingDef(
        name="allowed_hosts",
        env="STEEPLE_ALLOWED_HOSTS",
        default=lambda: "",
        parse=values.hosts,
        help="Comma-separated host names the API, UI and /metrics answer in the Host "
        "header (DNS rebinding defence); empty: the listen address, localhost names and "
        "public_url's host. * turns the check off.",
    ),
    SettingDef(
        name="public_url",
        env="STEEPLE_PUBLIC_URL",
        default=lambda: "",
        parse=values.public_url,
        help="The URL clients reach the appliance at (https://cron.example.org): setup "
        "links and the receiver guide are built from it; empty: the listen address.",
    ),
)


def is_list(d: SettingDef) -> bool:
    """Whether the setting is a list (a TOML array in a file, commas elsewhere)."""
    return d.parse in (values.cidrs, values.networks, values.hosts)
