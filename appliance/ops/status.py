"""``steeple status``: the health figures of this data directory, read from the database
(no running appliance needed): whether an appliance holds it, the queue, the planner's
lag, recent rates and lateness, sizes, free disk, the last check and backup, the last
restart's downtime report. ``/metrics`` and the operator page ``/admin/health`` show the
same figures, computed by the same function
(:func:`appliance.store.figures.operator.operator_figures`)."""

from __future__ import annotations

from appliance import __version__
from appliance.clock import SystemClock
from appliance.core.instants import format_instant
from appliance.errors import StoreError
from appliance.settings.model import Settings
from appliance.store.figures.operator import operator_figures
from appliance.store.infra.lockfile import holder
from appliance.store.restarts import LastRestart
from appliance.wiring.storage import describe, open_configured_store


def figures(settings: Settings) -> dict[str, object]:
    """Name → value, in the order they are printed."""
    if not settings.uses_postgres and not settings.db_path.exists():
        raise StoreError(f"no database at {settings.db_path} yet: start `steeple serve` first")
    now = SystemClock().now_ms()
    db = open_configured_store(settings, migrate_schema=False, check=False)
    try:
        f = db.read_now(operator_figures, disk=db.disk, now=now)
    finally:
        db.close()
    h = f.health
    pid = None if settings.uses_postgres else holder(settings.lock_path)
    return {
        "version": __version__,
        "database": describe(settings),
        "appliance": _running(settings, pid),
        "started_at": _instant(h.last_start_ms),
        "uptime_seconds": None
        if pid is None or h.last_start_ms is None
        else _age(now, h.last_start_ms),
        "schema_version": h.schema_version,
        "tenants": h.tenants,
        "active_schedules": h.active_schedules,
        "runs_running": h.runs_running,
        "runs_waiting": h.runs_pending,
        "runs_due": h.runs_due,
        "runs_retrying": h.runs_retrying,
        "runs_breaker_waiting": h.runs_breaker_waiting,
        "oldest_due_age_seconds": h.oldest_due_age_ms / 1000,
        "planner_lag_seconds": h.planner_lag_ms / 1000,
        "delivered_per_minute": f.delivered_per_minute,
        "failed_per_minute": f.failed_per_minute,
        "lateness_p50_seconds": _seconds(f.lateness_p50_ms),
        "lateness_p99_seconds": _seconds(f.lateness_p99_ms),
        "clock_jumps_24h": f.clock_jumps_24h,
        "db_bytes": f.db_bytes,
        "wal_bytes": f.wal_bytes,
        "free_disk_bytes": f.free_disk_bytes,
        "free_pages": h.freelist_count,
        "last_check": _instant(f.last_check_ms),
        "last_backup": _instant(f.last_backup_ms),
        "last_backup_age_seconds": None
        if f.last_backup_ms is None
        else _age(now, f.last_backup_ms),
        **_restart(h.last_restart),
    }


def _running(settings: Settings, pid: int | None) -> str:
    if settings.uses_postgres:  # replicas on other machines hold no lock here
        return "replicas (see each one's /readyz)"
    return "not running" if pid is None else f"running (pid {pid or '?'})"


def _restart(restart: LastRestart | None) -> dict[str, object]:
    """The last downtime report (contracts/events/appliance.restarted.json)."""
    if restart is None:
        return {"last_restart": None}
    data = restart.data
    return {
        "last_restart": format_instant(restart.at),
        "last_restart_downtime_seconds": data["downtime_ms"] / 1000,
        "last_restart_clean": data["clean_shutdown"],
        "last_restart_restored_at": data.get("restored_at"),  # absent from older reports
        "last_restart_late": data["late"],
        "last_restart_missed": data["missed"],
        "last_restart_reclaimed": data["reclaimed"],
    }


def _instant(ms: int | None) -> str | None:
    return None if ms is None else format_instant(ms)


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def _age(now: int, ms: int) -> int:
    return (now - ms) // 1000
