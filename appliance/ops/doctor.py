"""``steeple doctor``: what is wrong with this installation, one line per finding with
the fix. Exit status 1 when anything needs action (a ``fail``, or a ``warn`` that blocks),
else 0. A warning that does not block is advice for a healthy install: a fresh one has no
backup yet, and that is said with the command to make one, not reported as broken.

It reads, never writes: the database is opened without migrating, and works whether or
not an appliance is running.
"""

from __future__ import annotations

import ipaddress
import os
import platform
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from appliance import __version__
from appliance.clock import SystemClock
from appliance.core.hosts import ANY
from appliance.core.instants import format_instant
from appliance.errors import StoreError
from appliance.settings.model import Settings
from appliance.store.figures.database import journal_mode, quick_check, sqlite_version
from appliance.store.infra.backend import Store
from appliance.store.infra.database import BUSY_TIMEOUT_MS, Database
from appliance.store.infra.datadir import COMPANIONS
from appliance.store.infra.schema import needed_version, schema_version
from appliance.store.infra.snapshot import check_backup_dir, last_backup
from appliance.store.proxy_seen import proxy_seen
from appliance.wiring.storage import describe, open_configured_store

NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "fuse.sshfs", "virtiofs")
MIN_FREE_BYTES = 1 << 30
WAL_WARN_BYTES = 256 << 20
BACKUP_WARN_DAYS = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    level: str  # ok, warn or fail
    text: str
    fix: str = ""
    blocking: bool = True  # a warn that sets the exit status (a fail always does)

    def __str__(self) -> str:
        return f"{self.level:<5} {self.text}" + (f" — fix: {self.fix}" if self.fix else "")


def exit_status(found: list[Finding]) -> int:
    """1 when a finding needs action, else 0: what monitoring and scripts read."""
    return 1 if any(f.level == "fail" or (f.level == "warn" and f.blocking) for f in found) else 0


TIMESYNCD_SYNCED = Path("/run/systemd/timesync/synchronized")


def examine(settings: Settings) -> list[Finding]:
    return [
        *_versions(),
        *_data_dir(settings),
        *_database(settings),
        *_config(settings),
        *exposure(settings),
        clock_finding(TIMESYNCD_SYNCED),
    ]


def clock_finding(marker: Path) -> Finding:
    """Clock sync where it is readable without privileges: systemd-timesyncd's marker.
    Informational: other daemons (chrony, ntpd) leave no such file."""
    if marker.exists():
        return Finding(level="ok", text="clock synchronized (systemd-timesyncd)")
    return Finding(
        level="ok",
        text="clock sync state unknown (no systemd-timesyncd marker); schedules fire on"
        " wall-clock time: keep NTP running",
    )


def _versions() -> Iterator[Finding]:
    yield Finding(
        level="ok",
        text=f"steeple {__version__}, Python {platform.python_version()},"
        f" SQLite {sqlite_version()}",
    )


def _data_dir(settings: Settings) -> Iterator[Finding]:
    data = settings.data_dir
    info = data.stat()
    mode = stat.S_IMODE(info.st_mode)
    usage = shutil.disk_usage(data)
    fs = filesystem_type(data)
    yield Finding(
        level="ok",
        text=f"data directory {data}: owner uid {info.st_uid}, mode {mode:04o},"
        f" {usage.free / (1 << 30):.1f} GiB free, filesystem {fs}",
    )
    if info.st_uid != os.geteuid():
        yield Finding(
            level="fail",
            text=f"{data} belongs to uid {info.st_uid}, not you (uid {os.geteuid()}): files"
            " you create there (the WAL) would lock the service out",
            fix=f"run as its owner: sudo -u '#{info.st_uid}' steeple … (docs/operations.md,"
            ' "systemd")',
        )
    for path in [
        data,
        *(settings.db_path.with_name(settings.db_path.name + s) for s in COMPANIONS),
    ]:
        if path.exists() and stat.S_IMODE(path.stat().st_mode) & 0o077:
            yield Finding(
                level="warn",
                text=f"{path} is readable by others (mode {stat.S_IMODE(path.stat().st_mode):04o});"
                " it holds signing secrets",
                fix="start `steeple serve` once (it tightens the modes) or chmod go= it",
            )
    if usage.free < MIN_FREE_BYTES:
        yield Finding(
            level="warn",
            text=f"only {usage.free >> 20} MiB free on {data}",
            fix="free disk space: a full disk stops the appliance",
        )
    if fs in NETWORK_FILESYSTEMS:
        yield Finding(
            level="fail",
            text=f"{data} is on a network filesystem ({fs}): SQLite's WAL needs one host's"
            " shared memory and locks",
            fix="move the data directory to a local disk",
        )


def filesystem_type(path: Path, mounts: str | None = None) -> str:
    """The type of the filesystem holding ``path`` from ``mounts`` (/proc/mounts' text;
    "unknown" if not readable): the longest mount point that contains it."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8")
        except OSError:
            return "unknown"
    resolved, best, kind = path.resolve(), "", "unknown"
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if resolved.is_relative_to(point) and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def _database(settings: Settings) -> Iterator[Finding]:
    if settings.uses_postgres:
        yield from _postgres(settings)
        return
    if not settings.db_path.exists():
        yield Finding(
            level="warn",
            text=f"no database at {settings.db_path} yet",
            fix="start `steeple serve` (or create a tenant) with this data directory",
        )
        return
    try:
        db = Database.open(settings.db_path, readers=1, migrate_schema=False, check=False)
    except StoreError as exc:
        yield Finding(level="fail", text=str(exc), fix="restore a backup (steeple restore)")
        return
    try:
        yield from _schema(db, settings)
    finally:
        db.close()
    yield from _files(settings)


def _postgres(settings: Settings) -> Iterator[Finding]:
    """The PostgreSQL database: reachable, and its schema version (docs/scale-out.md)."""
    try:
        db = open_configured_store(settings, migrate_schema=False, check=False)
    except StoreError as exc:
        yield Finding(level="fail", text=str(exc), fix="check the URL, the network, the server")
        return
    try:
        version, known = db.read_now(schema_version), db.read_now(needed_version)
    finally:
        db.close()
    level = "ok" if version == known else "warn" if version < known else "fail"
    yield Finding(
        level=level,
        text=f"database {describe(settings)}: PostgreSQL, schema {version} of {known}",
        fix="" if level == "ok" else "start this Steeple (it migrates) or install the newer one",
    )


def _schema(db: Store, settings: Settings) -> Iterator[Finding]:
    version, known = db.read_now(schema_version), db.read_now(needed_version)
    mode = db.read_now(journal_mode)
    checked = db.read_now(quick_check)
    yield Finding(
        level="ok",
        text=f"database {settings.db_path}: schema {version} of {known}, journal {mode},"
        f" synchronous FULL and busy timeout {BUSY_TIMEOUT_MS} ms on every connection",
    )
    if version > known:
        yield Finding(
            level="fail",
            text=f"schema {version} is newer than this Steeple (knows {known})",
            fix="install the Steeple that wrote it, or restore the pre-migration snapshot",
        )
    elif version < known:
        yield Finding(
            level="warn",
            text=f"{known - version} migrations pending",
            fix="steeple migrate --dry-run, then steeple migrate (or restart serve)",
        )
    if mode != "wal":
        yield Finding(level="fail", text=f"journal mode {mode}", fix="start `steeple serve` once")
    if checked != ["ok"]:
        yield Finding(
            level="fail",
            text=f"quick_check found damage: {'; '.join(checked)}",
            fix="restore the last good backup (steeple restore)",
        )
    else:
        yield Finding(level="ok", text="quick_check ok")


def _files(settings: Settings) -> Iterator[Finding]:
    wal = settings.db_path.with_name(settings.db_path.name + "-wal")
    size = wal.stat().st_size if wal.exists() else 0
    if size > WAL_WARN_BYTES:
        yield Finding(
            level="warn",
            text=f"the WAL is {size >> 20} MiB: checkpoints are not keeping up (a long reader?)",
            fix="look for long-running readers (a replication tool, a stuck backup)",
        )
    yield from _backup_dir(settings)
    last = last_backup(settings.data_dir)
    if last is None:
        yield Finding(
            level="warn",
            text="no backup yet for this data directory (make the first one now)",
            fix="steeple backup --to /a/private/place, and schedule it (docs/operations.md)",
            blocking=False,
        )
        return
    age_days = (SystemClock().now_ms() - last.at_ms) / 86_400_000
    if age_days > BACKUP_WARN_DAYS:
        yield Finding(
            level="warn",
            text=f"the last backup is {age_days:.0f} days old ({last.path})",
            fix="steeple backup --to …, and schedule it (cron or a systemd timer)",
        )
    else:
        yield Finding(level="ok", text=f"last backup {age_days:.1f} days ago: {last.path}")


def _backup_dir(settings: Settings) -> Iterator[Finding]:
    """Scheduled backups refuse a directory other users could write: say so now."""
    folder = settings.backups_path
    if settings.backup_every_hours == 0 or not folder.exists():
        return
    try:
        check_backup_dir(folder)
    except StoreError as exc:
        yield Finding(
            level="warn",
            text=f"backup_dir: {exc}; scheduled backups are refused there",
            fix=f"chmod 0700 {folder} (owned by the appliance's user), or choose another",
        )


def _config(settings: Settings) -> Iterator[Finding]:
    source = settings.config_file
    if source is not None and source.exists() and stat.S_IMODE(source.stat().st_mode) & 0o077:
        yield Finding(
            level="warn",
            text=f"{source} is readable by group or others",
            fix=f"chmod go= {source}",
        )
    wide = [
        cidr
        for cidr in settings.metrics_allow
        if not ipaddress.ip_network(cidr, strict=False).is_loopback
    ]
    if wide and not settings.metrics_token:
        yield Finding(
            level="warn",
            text=f"/metrics answers {', '.join(wide)} without a token",
            fix="set metrics_token (STEEPLE_METRICS_TOKEN_FILE) or narrow metrics_allow",
        )
    yield Finding(
        level="ok",
        text=f"settings from {source or 'defaults, environment and flags'};"
        f" listening on {settings.listen}",
    )


def exposure(settings: Settings) -> Iterator[Finding]:
    """Who may reach the appliance (docs/operations.md, "Who may reach the appliance"):
    the Host check off, a public listen without public_url, an undeclared proxy."""
    if ANY in settings.host_allow_list:
        yield Finding(
            level="warn",
            text="allowed_hosts is *: any Host is answered, so DNS rebinding can reach the"
            " UI and /metrics",
            fix="list the names clients use in allowed_hosts, or set public_url",
        )
    loopback = is_loopback_host(settings.listen.host)
    if not settings.public_url and (not loopback or settings.trust_proxy):
        where = "behind a proxy" if loopback else f"on {settings.listen}"
        yield Finding(
            level="warn",
            text=f"serving {where} without public_url: setup links and the guide point at"
            " the address a request arrived on, and only loopback names and the listen"
            " address are allowed Hosts",
            fix="set public_url to the URL clients use (https://cron.example.org)",
        )
    if loopback:
        return
    seen = proxy_seen(settings.data_dir)
    if settings.trust_proxy == 0 and seen is not None:
        yield Finding(
            level="warn",
            text=f"requests from {seen.peer} carried X-Forwarded-For (first at"
            f" {format_instant(seen.at_ms)}) but trust_proxy is 0: every client behind"
            " that proxy shares one sign-in throttle, and /metrics trusts the proxy's address",
            fix="set trust_proxy to the number of reverse proxies in front (docs/operations.md)",
        )


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
