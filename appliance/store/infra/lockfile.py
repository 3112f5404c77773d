"""The data directory's exclusive lock (ADR 0033): one appliance per database file.

``<db>.lock`` is held with ``flock`` for the life of the process; the kernel drops it when
the process dies (even by SIGKILL), so a restart after a crash never waits for a lease.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from appliance.errors import DatabaseLocked


class LockFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DatabaseLocked(
                f"another Steeple appliance is running on this data directory "
                f"(lock held on {self.path}); stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> LockFile:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder(path: Path) -> int | None:
    """The pid written by the appliance holding ``path``'s lock, or None when nobody holds
    it (the file is not created). 0 when it is held but the pid is unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
