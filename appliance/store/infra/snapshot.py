"""Consistent copies of the database, and putting one back.

Rules (docs/operations.md, "Backup and restore"):
- A snapshot is one ``VACUUM INTO`` from a connection of its own: a single read
  transaction, so it is consistent while the appliance writes, and it never restarts (the
  backup API's incremental copy restarts whenever another connection commits, and under a
  busy writer may never finish). It does not block the writer; the WAL cannot be
  checkpointed past it while it runs.
- It is written inside a private directory (``mkdtemp``: a random name, ``0700``) made in
  the target's directory, so no other user can plant a file or symlink for ``VACUUM INTO``
  to write through, made ``0600``, ``integrity_check``-ed, fsynced, then linked into
  place (never over an existing name) and the directory fsynced: a crash leaves the old
  target or the new one, never half a file.
- The target's directory must be safe (:func:`check_backup_dir`): owned by this user or
  root, and not writable by group or others unless sticky. Otherwise the backup is refused.
- A copy is accepted for a restore only if ``integrity_check`` passes and its schema is
  one this Steeple knows (older ones migrate at the next start). The live database and
  its ``-wal``/``-shm`` are moved aside, never deleted.
- A restored copy never hands out an event sequence number again: before it is put in
  place, its events' sequence continues above the highest the replaced file ever used
  (read from that file), or :data:`SEQ_GAP` above its own when the replaced file is
  missing or unreadable — so a consumer resuming with ``?after=`` or ``Last-Event-ID``
  from before the restore misses no new event and never reads one number twice.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import apsw

from appliance.core.instants import format_instant, parse_instant
from appliance.errors import StoreError
from appliance.store.infra.datadir import FILE_MODE
from appliance.store.infra.migrate import current_version, migrations

BACKUPS_DIRNAME = "backups"
LAST_BACKUP = "last-backup.json"  # in the data directory: the last successful backup
RESTORED = "restored.json"  # in the data directory: a restore the next start has not reported
# How far a restored copy's event sequence jumps when the file it replaces cannot be read:
# more events than any appliance writes between a backup and its restore, and still far
# below 2**53 (an exact number in every JSON reader) after millions of restores.
SEQ_GAP = 2**32


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    path: Path
    bytes: int
    schema_version: int


def _open_existing(path: Path, *, readonly: bool = False) -> apsw.Connection:
    if not path.is_file():
        raise StoreError(f"{path} does not exist")
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(5000)
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    except apsw.Error as exc:
        raise StoreError(f"{path} is not a SQLite database Steeple can read: {exc}") from None
    return conn


def check_backup_dir(folder: Path) -> None:
    """Refuse a directory another user could plant files in or swap names in: it must be
    owned by this user or root, and not group- or world-writable unless sticky."""
    try:
        info = folder.stat()
    except FileNotFoundError:
        raise StoreError(f"{folder} does not exist: create it (mode 0700) first") from None
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{folder} is not a directory")
    if info.st_uid not in (os.geteuid(), 0):
        raise StoreError(
            f"{folder} is owned by another user (uid {info.st_uid}): back up into a"
            " directory you own (mode 0700)"
        )
    shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if shared and not info.st_mode & stat.S_ISVTX:
        raise StoreError(
            f"{folder} is writable by other users (mode {stat.S_IMODE(info.st_mode):04o}):"
            " back up into a private directory (chmod 0700)"
        )


def take_snapshot(db_path: Path, target: Path) -> Snapshot:
    """Write a consistent, checked copy of ``db_path`` to ``target`` (which must not
    exist, in a directory :func:`check_backup_dir` accepts). Safe while the appliance
    runs."""
    check_backup_dir(target.parent)
    if target.exists() or target.is_symlink():
        raise StoreError(f"{target} exists: choose a new name (a backup is never overwritten)")
    private = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        temporary = private / "copy.db"
        _vacuum_into(db_path, temporary)
        temporary.chmod(FILE_MODE)
        version = verify_copy(temporary)
        _fsync(temporary)
        _link_new(temporary, target)
        _fsync(target.parent)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return Snapshot(path=target, bytes=target.stat().st_size, schema_version=version)


def _vacuum_into(db_path: Path, temporary: Path) -> None:
    conn = _open_existing(db_path)
    try:
        conn.execute("VACUUM INTO ?", (str(temporary),))
    except apsw.Error as exc:
        raise StoreError(f"the snapshot of {db_path} failed: {exc}") from None
    finally:
        conn.close()


def _link_new(source: Path, target: Path) -> None:
    """Give ``source`` the name ``target`` only if that name is free (a hard link fails
    on an existing name, where a rename would replace it)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:
        raise StoreError(
            f"{target} exists: choose a new name (a backup is never overwritten)"
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        source.rename(target)  # a filesystem without hard links


def verify_copy(path: Path) -> int:
    """``integrity_check`` and the schema range of a copy; returns its schema version."""
    conn = _open_existing(path, readonly=True)
    try:
        problems = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
        version = current_version(conn)
        has_tenants = conn.execute(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'tenants'"
        ).fetchone()
    except apsw.Error as exc:
        raise StoreError(f"{path}: the integrity check failed: {exc}") from None
    finally:
        conn.close()
    if problems != ["ok"]:
        raise StoreError(f"{path}: the integrity check failed: {'; '.join(problems[:5])}")
    known = len(migrations())
    if version < 1 or has_tenants is None:
        raise StoreError(f"{path} is not a Steeple database (schema version {version})")
    if version > known:
        raise StoreError(
            f"{path} has schema version {version}, newer than this Steeple (knows {known}):"
            " restore it with the Steeple that wrote it"
        )
    return version


def snapshot_before_migration(db_path: Path, conn: apsw.Connection) -> Path | None:
    """``backups/pre-migrate-vA-vB.db`` beside the database when migrations are pending
    on a database that has a schema; the rollback of an upgrade. None when nothing to do."""
    version, known = current_version(conn), len(migrations())
    if version == 0 or version >= known:
        return None
    folder = db_path.parent / BACKUPS_DIRNAME
    folder.mkdir(mode=0o700, exist_ok=True)
    name = f"pre-migrate-v{version}-v{known}"
    target = folder / f"{name}.db"
    n = 1
    while target.exists():  # upgraded, rolled back, upgraded again: keep each
        n += 1
        target = folder / f"{name}-{n}.db"
    return take_snapshot(db_path, target).path


def put_in_place(source: Path, db_path: Path, *, aside_suffix: str) -> list[Path]:
    """Copy ``source`` (already verified) to ``db_path`` atomically, first moving the
    live database, ``-wal`` and ``-shm`` aside with ``aside_suffix``. The caller holds the
    data directory's lock. Returns the paths moved aside."""
    replaced = highest_event_seq(db_path)
    moved = []
    for suffix in ("", "-wal", "-shm"):
        live = db_path.with_name(db_path.name + suffix)
        if live.exists():
            aside = live.with_name(live.name + aside_suffix)
            live.rename(aside)
            moved.append(aside)
    temporary = db_path.with_name(f".{db_path.name}.restoring-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(fd, "wb") as out, source.open("rb") as copy:
        while chunk := copy.read(1 << 20):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    continue_event_seq(temporary, above=replaced)
    temporary.rename(db_path)
    _fsync(db_path.parent)
    return moved


def highest_event_seq(path: Path) -> int | None:
    """The highest event sequence number ``path`` ever handed out (its ``AUTOINCREMENT``
    counter, which outlives pruned events), read without writing the file; None when
    there is no such file or it cannot be read."""
    try:
        conn = _open_existing(path, readonly=True)
    except StoreError:
        return None
    try:
        row = conn.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),"
            " coalesce((SELECT max(seq) FROM events), 0))"
        ).fetchone()
    except apsw.Error:
        return None
    finally:
        conn.close()
    return None if row is None else int(row[0])


def continue_event_seq(path: Path, *, above: int | None) -> int:
    """Make the next event of the copy at ``path`` numbered above ``above`` (the replaced
    file's highest) and above its own; :data:`SEQ_GAP` above its own when ``above`` is
    unknown. Returns the highest number now taken."""
    own = highest_event_seq(path)
    if own is None:
        raise StoreError(f"{path}: cannot read its events")
    floor = max(own, above) if above is not None else own + SEQ_GAP
    conn = _open_existing(path)
    try:
        with conn:
            conn.execute("DELETE FROM sqlite_sequence WHERE name = 'events'")
            conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)", (floor,))
    finally:
        conn.close()
    _fsync(path)
    return floor


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True, kw_only=True)
class LastBackup:
    at_ms: int
    path: str
    bytes: int


def record_backup(data_dir: Path, last: LastBackup) -> None:
    """Replace the record of the last successful backup (atomically)."""
    record = {"at": format_instant(last.at_ms), "path": last.path, "bytes": last.bytes}
    _write_record(data_dir, LAST_BACKUP, record)


def _write_record(data_dir: Path, name: str, record: dict[str, object]) -> None:
    """Replace the data directory's record ``name`` atomically (a fresh ``0600`` file)."""
    temporary = data_dir / f".{name}.{secrets.token_hex(8)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(record, out)
    temporary.rename(data_dir / name)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreRecord:
    """A restore the next start reports (core/downtime.py): the copy's state ends at its
    own last record, not where the replaced database stopped."""

    at_ms: int
    source: str


def record_restore(data_dir: Path, restore: RestoreRecord) -> None:
    """Note a restore for the next start's downtime report."""
    _write_record(
        data_dir, RESTORED, {"at": format_instant(restore.at_ms), "source": restore.source}
    )


def pending_restore(data_dir: Path) -> RestoreRecord | None:
    """The restore no start has reported yet, or None (none, or unreadable)."""
    try:
        raw = json.loads((data_dir / RESTORED).read_text(encoding="utf-8"))
        return RestoreRecord(at_ms=parse_instant(raw["at"]), source=str(raw["source"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def forget_restore(data_dir: Path) -> None:
    """Drop the record once a start reported the restore."""
    (data_dir / RESTORED).unlink(missing_ok=True)


def last_backup(data_dir: Path) -> LastBackup | None:
    """The last backup ``steeple backup`` recorded, or None (none, or unreadable)."""
    try:
        raw = json.loads((data_dir / LAST_BACKUP).read_text(encoding="utf-8"))
        return LastBackup(at_ms=parse_instant(raw["at"]), path=raw["path"], bytes=raw["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


DATED_PREFIX = "steeple-"


def backup_into(db_path: Path, to: Path, *, now_ms: int) -> Snapshot:
    """A checked snapshot at ``to`` (a new file, or a directory to put a dated
    ``steeple-<UTC time>.db`` in), recorded as the data directory's last backup."""
    if to.is_dir():
        stamp = format_instant(now_ms - now_ms % 1000).replace(":", "").replace("-", "")
        to = to / f"{DATED_PREFIX}{stamp}.db"
    snapshot = take_snapshot(db_path, to)
    record_backup(
        db_path.parent, LastBackup(at_ms=now_ms, path=str(snapshot.path), bytes=snapshot.bytes)
    )
    return snapshot


def prune_dated(folder: Path, *, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` dated backups in ``folder`` (only files this
    module named: ``steeple-<UTC time>.db``). Returns what was deleted."""
    dated = sorted(folder.glob(f"{DATED_PREFIX}*.db"))  # the UTC stamp sorts by time
    doomed = dated[: max(0, len(dated) - keep)]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed
