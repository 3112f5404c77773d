"""``steeple backup``, ``restore`` and ``migrate``: the operator's side of
:mod:`appliance.store.infra.snapshot` (docs/operations.md, "Backup and restore").

``backup`` runs while the appliance serves (one consistent ``VACUUM INTO``); ``restore``
and ``migrate`` take the data directory's lock, so they refuse while an appliance runs.
The last successful backup is recorded in the data directory
(:func:`appliance.store.infra.snapshot.backup_into`; ``doctor``, ``status`` and ``/metrics``
report its age).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from appliance.clock import SystemClock
from appliance.core.instants import format_instant
from appliance.settings.model import Settings
from appliance.store.infra.database import Database
from appliance.store.infra.lockfile import LockFile
from appliance.store.infra.migrate import current_version, migrations, pending
from appliance.store.infra.schema import needed_version, schema_version
from appliance.store.infra.snapshot import (
    RestoreRecord,
    Snapshot,
    backup_into,
    put_in_place,
    record_restore,
    verify_copy,
)
from appliance.wiring.storage import open_configured_store

RESTORE_NOTE = """\
What a restore means: the appliance will start from the state in this copy. Runs
delivered after the copy was taken are not in it, so the planner plans those occurrences
again and receivers get them a second time — with the same X-Idempotency-Key as before
(keys derive from the schedule and the occurrence), so receivers that deduplicate on the
key are safe. Tenants, keys and schedules created after the copy are gone; re-create them.
Start the appliance as usual: migrations, boot reclaim and catch-up run first."""


def backup(settings: Settings, to: Path) -> Snapshot:
    """A checked snapshot at ``to`` (a new file, or a directory to put a dated one in)."""
    return backup_into(settings.db_path, to, now_ms=SystemClock().now_ms())


@dataclass(frozen=True, slots=True, kw_only=True)
class Restored:
    schema_version: int
    moved_aside: list[Path]


def restore(settings: Settings, source: Path) -> Restored:
    """Put a verified copy in place of the database; refuses while an appliance runs. The
    next start's downtime report says it started from a restored copy."""
    with LockFile(settings.lock_path):
        version = verify_copy(source)
        now = SystemClock().now_ms()
        stamp = format_instant(now).replace(":", "")
        moved = put_in_place(source, settings.db_path, aside_suffix=f".before-restore-{stamp}")
        record_restore(settings.data_dir, RestoreRecord(at_ms=now, source=str(source)))
    return Restored(schema_version=version, moved_aside=moved)


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    before: int
    after: int
    pending: list[int]


def migrate(settings: Settings, *, dry_run: bool) -> Migration:
    """Apply pending migrations (a snapshot first), or with ``dry_run`` only list them.
    Refuses while an appliance runs, and a database newer than this Steeple. On PostgreSQL
    there is no snapshot: the database's own backups are the rollback (docs/scale-out.md)."""
    if settings.uses_postgres:
        return _migrate_postgres(settings, dry_run=dry_run)
    with LockFile(settings.lock_path):
        db = Database.open(settings.db_path, migrate_schema=False, check=False)
        try:
            before = db.read_now(current_version)
            todo = db.read_now(pending)
        finally:
            db.close()
        if dry_run or not todo:
            return Migration(before=before, after=before, pending=todo)
        Database.open(settings.db_path).close()  # snapshot, migrate, quick_check
    return Migration(before=before, after=len(migrations()), pending=todo)


def _migrate_postgres(settings: Settings, *, dry_run: bool) -> Migration:
    db = open_configured_store(settings, migrate_schema=False)
    try:
        before, known = db.read_now(schema_version), db.read_now(needed_version)
    finally:
        db.close()
    todo = list(range(before + 1, known + 1))
    if dry_run or not todo:
        return Migration(before=before, after=before, pending=todo)
    open_configured_store(settings).close()  # migrates, under the schema table's lock
    return Migration(before=before, after=known, pending=todo)
