"""The data directory is private: it holds every tenant's signing secrets and receiver
credentials (custom headers) in clear.

Rules this module guards (docs/configuration.md, "The data directory"):
- The directory is created ``0700`` and the database file ``0600``, with explicit modes
  (the appliance also runs under ``umask 077``). SQLite gives the ``-wal``, ``-shm`` and
  ``-journal`` files the database file's mode, so they are born ``0600`` too.
- At boot, a directory or file left wider by an older version or by hand (``0755``,
  ``0644``) is tightened, and the caller logs what changed, once.
- Only Steeple's own files are touched: the database and its companions, the lock file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
COMPANIONS = ("", "-wal", "-shm", "-journal", ".lock")  # suffixes to the database's name


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeChange:
    path: Path
    before: int
    after: int

    def __str__(self) -> str:
        return f"{self.path} {self.before:04o} -> {self.after:04o}"


def create_private_file(path: Path) -> None:
    """Create the directory of ``path`` (``0700``) and ``path`` itself (``0600``, empty)
    if either is missing; an existing file is left as it is."""
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE))


def tighten_modes(db_path: Path) -> list[ModeChange]:
    """Take group and other permissions off the database's directory and the files of
    :data:`COMPANIONS` that exist. Returns what was changed (nothing, normally)."""
    changes = [_tighten(db_path.parent, DIR_MODE)]
    for suffix in COMPANIONS:
        changes.append(_tighten(db_path.with_name(db_path.name + suffix), FILE_MODE))
    return [change for change in changes if change is not None]


def _tighten(path: Path, limit: int) -> ModeChange | None:
    try:
        before = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    after = before & limit
    if after == before:
        return None
    path.chmod(after)
    return ModeChange(path=path, before=before, after=after)
