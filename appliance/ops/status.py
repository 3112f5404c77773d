"""``steeple status``: the health figures of this data directory, read from the database
(no running appliance needed): whether an appliance holds it, the queue, the planner's
lag, sizes, the last backup, the last restart's downtime report. ``/metrics`` exports the
same health figures (:func:`appliance.store.stats.health`)."""

from __future__ import annotations

from pathlib import Path

from appliance import __version__
from appliance.clock import SystemClock
from appliance.core.instants import format_instant
from appliance.errors import StoreError
from appliance.settings import Settings
from appliance.store.database import Database
from appliance.store.lockfile import holder
from appliance.store.restarts import LastRestart
from appliance.store.snapshot import last_backup
from appliance.store.stats import health


def figures(settings: Settings) -> dict[str, object]:
    """Name → value, in the order they are printed."""
    if not settings.db_path.exists():
        raise StoreError(f"no database at {settings.db_path} yet: start `steeple serve` first")
    now = SystemClock().now_ms()
    db = Database.open(settings.db_path, readers=1, migrate_schema=False, check=False)
    try:
        h = db.read_now(health, now=now)
    finally:
        db.close()
    pid = holder(settings.lock_path)
    backup = last_backup(settings.data_dir)
    return {
        "version": __version__,
        "database": str(settings.db_path),
        "appliance": "not running" if pid is None else f"running (pid {pid or '?'})",
        "started_at": None if h.last_start_ms is None else format_instant(h.last_start_ms),
        "schema_version": h.schema_version,
        "tenants": h.tenants,
        "active_schedules": h.active_schedules,
        "runs_running": h.runs_running,
        "runs_waiting": h.runs_pending,
        "runs_due": h.runs_due,
        "oldest_due_age_seconds": h.oldest_due_age_ms / 1000,
        "planner_lag_seconds": h.planner_lag_ms / 1000,
        "db_bytes": _size(settings.db_path),
        "wal_bytes": _size(settings.db_path.with_name(settings.db_path.name + "-wal")),
        "free_pages": h.freelist_count,
        "last_backup": None if backup is None else format_instant(backup.at_ms),
        "last_backup_age_seconds": None if backup is None else (now - backup.at_ms) // 1000,
        **_restart(h.last_restart),
    }


def _restart(restart: LastRestart | None) -> dict[str, object]:
    """The last downtime report (contracts/events/appliance.restarted.json)."""
    if restart is None:
        return {"last_restart": None}
    data = restart.data
    return {
        "last_restart": format_instant(restart.at),
        "last_restart_downtime_seconds": data["downtime_ms"] / 1000,
        "last_restart_clean": data["clean_shutdown"],
        "last_restart_late": data["late"],
        "last_restart_missed": data["missed"],
        "last_restart_reclaimed": data["reclaimed"],
    }


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0
