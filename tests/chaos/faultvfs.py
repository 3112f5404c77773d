"""A fault-injecting SQLite VFS for the chaos suite (scenarios 7 and 8).

:class:`FaultVFS` wraps SQLite's default VFS (apsw ``VFS``/``VFSFile`` inheritance: every
call is passed through, shared memory included) and adds two things:

**A model of what a power cut would leave on disk.** For every file it tracks the
*durable image* — the content as of the file's last ``xSync`` — and the list of writes
and truncations issued since. :meth:`FaultVFS.crash_image` builds what the disk could
hold if power were cut at this instant: the durable image plus a random subset of the
unsynced operations, applied in their original order. A dropped write models a write
the disk never got to; keeping a later write while dropping an earlier one models
reordering (the drive persisted them out of order). Writes are not torn below their own
size (SQLite's WAL frames are checksummed against that anyway; we do not model it).
Deleting a file is treated as immediately durable. Temporary files (no name) are not
tracked. Every ``xWrite``, ``xTruncate`` and ``xSync`` is one *I/O operation*; the
``before_io`` hook runs before each, so a test can cut power "at operation N".

**Failing writes.** While :attr:`FaultVFS.failing` holds an apsw exception class,
every ``xWrite`` and ``xTruncate`` raises it — ``apsw.FullError`` is SQLITE_FULL (the
disk is full), ``apsw.IOError`` a generic I/O error (a disk remounted read-only). Reads
and syncs keep working, as on a real full disk.

Register by constructing (the name must be unique while registered); call
:meth:`FaultVFS.unregister` when done. Open databases with ``Database.open(path,
vfs=vfs.name)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import apsw


@dataclass(frozen=True, slots=True)
class Write:
    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Truncate:
    size: int


Operation = Write | Truncate


@dataclass
class FileImage:
    """One file as the disk holds it durably, and what was issued since its last sync."""

    durable: bytearray
    pending: list[Operation] = field(default_factory=list)

    def sync(self) -> None:
        self.durable = apply(self.durable, self.pending)
        self.pending = []


def apply(content: bytearray, operations: list[Operation]) -> bytearray:
    """``content`` with ``operations`` applied in order (a copy)."""
    result = bytearray(content)
    for op in operations:
        if isinstance(op, Truncate):
            del result[op.size :]
            continue
        end = op.offset + len(op.data)
        if len(result) < op.offset:
            result.extend(b"\0" * (op.offset - len(result)))
        result[op.offset : end] = op.data
    return result


class FaultVFS(apsw.VFS):
    def __init__(self, name: str, *, before_io: Callable[[FaultVFS], None] | None = None) -> None:
        super().__init__(name, "")
        self.name = name
        self.images: dict[str, FileImage] = {}
        self.operations = 0  # I/O operations so far (writes, truncations, syncs)
        self.failing: type[apsw.Error] | None = None
        self.failed_writes = 0
        self.before_io = before_io

    def xOpen(self, name: str | apsw.URIFilename | None, flags: list[int]) -> FaultFile:
        path = name.filename() if isinstance(name, apsw.URIFilename) else name
        if path is not None and path not in self.images:
            existing = Path(path).read_bytes() if Path(path).exists() else b""
            self.images[path] = FileImage(durable=bytearray(existing))
        return FaultFile(self, name, flags, path)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        self.images.pop(filename, None)
        super().xDelete(filename, syncdir)

    def io(self) -> None:
        """Count one I/O operation (called by :class:`FaultFile` before it acts)."""
        self.operations += 1
        if self.before_io is not None:
            self.before_io(self)

    def crash_image(self, rng: random.Random) -> dict[str, bytes]:
        """Path -> bytes the disk could hold after a power cut now (see the module doc)."""
        images = {}
        keep = rng.choice((0.0, 0.25, 0.5, 0.75, 1.0))  # how much the disk got to write
        for path, image in self.images.items():
            kept = [op for op in image.pending if rng.random() < keep]
            images[path] = bytes(apply(image.durable, kept))
        return images

    def unsynced(self) -> int:
        """Operations issued but not yet synced, over every file."""
        return sum(len(image.pending) for image in self.images.values())


class FaultFile(apsw.VFSFile):
    def __init__(
        self,
        vfs: FaultVFS,
        name: str | apsw.URIFilename | None,
        flags: list[int],
        path: str | None,
    ) -> None:
        super().__init__("", name, flags)
        self._vfs = vfs
        self._image = None if path is None else vfs.images[path]

    def _fail(self) -> None:
        if self._vfs.failing is not None and self._image is not None:
            self._vfs.failed_writes += 1
            raise self._vfs.failing("injected write failure")

    def xWrite(self, data: bytes, offset: int) -> None:
        self._vfs.io()
        self._fail()
        super().xWrite(data, offset)
        if self._image is not None:
            self._image.pending.append(Write(offset, bytes(data)))

    def xTruncate(self, newsize: int) -> None:
        self._vfs.io()
        self._fail()
        super().xTruncate(newsize)
        if self._image is not None:
            self._image.pending.append(Truncate(newsize))

    def xSync(self, flags: int) -> None:
        self._vfs.io()
        super().xSync(flags)
        if self._image is not None:
            self._image.sync()


def write_image(images: dict[str, bytes], source_db: Path, target_db: Path) -> None:
    """Lay a crash image down as files next to ``target_db``: the image of
    ``source_db`` becomes ``target_db``, its ``-wal`` becomes ``target_db-wal``, etc."""
    target_db.parent.mkdir(parents=True, exist_ok=True)
    for path, content in images.items():
        if not path.startswith(str(source_db)):
            continue
        suffix = path[len(str(source_db)) :]
        Path(str(target_db) + suffix).write_bytes(content)
