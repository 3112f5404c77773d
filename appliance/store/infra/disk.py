"""Where a store keeps its bytes, as the operator's figures read them.

Each store says it for itself (:attr:`appliance.store.infra.backend.Store.disk`), so the
figures never ask which store they read (docs/adr/0044-postgresql-store.md):

- SQLite (:class:`SqliteDisk`): a file in the data directory. Its size, its WAL's, the
  free space beside it and the last backup ``steeple backup`` recorded are read there.
- PostgreSQL (:class:`ServerDisk`): its disk is its server's. Its size is its pages;
  WAL, free space and backups are PostgreSQL's to report, not this process's.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from appliance.store.infra.snapshot import last_backup


class Disk(Protocol):
    def db_bytes(self, paged_bytes: int) -> int:
        """The database's size; ``paged_bytes``: its page count × page size, as its own
        figures say (``store/stats.py``)."""
        ...

    def wal_bytes(self) -> int: ...

    def free_bytes(self) -> int | None:
        """Free space where the database grows; None: the server's, not seen from here."""
        ...

    def last_backup_ms(self) -> int | None:
        """When the last backup this appliance recorded was made; None: none recorded."""
        ...


@dataclass(frozen=True, slots=True)
class SqliteDisk:
    """The SQLite store's file (and its ``-wal`` beside it)."""

    file: Path

    def db_bytes(self, paged_bytes: int) -> int:
        return _size(self.file)

    def wal_bytes(self) -> int:
        return _size(self.file.with_name(self.file.name + "-wal"))

    def free_bytes(self) -> int | None:
        return shutil.disk_usage(self.file.parent).free

    def last_backup_ms(self) -> int | None:
        backup = last_backup(self.file.parent)
        return None if backup is None else backup.at_ms


@dataclass(frozen=True, slots=True)
class ServerDisk:
    """A database server's disk: only the database's own size is known here."""

    def db_bytes(self, paged_bytes: int) -> int:
        return paged_bytes

    def wal_bytes(self) -> int:
        return 0

    def free_bytes(self) -> int | None:
        return None

    def last_backup_ms(self) -> int | None:
        return None  # pg_dump or point-in-time recovery: the server's operator's


SERVER_DISK: Final = ServerDisk()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
