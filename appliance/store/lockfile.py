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
