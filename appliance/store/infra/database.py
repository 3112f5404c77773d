"""The SQLite database: one writer connection, a few reader connections, never on the loop.

Rules this module guards (ADR 0033, docs/architecture.md "Storage"):
- WAL, ``synchronous=FULL``: an acknowledged commit survives power loss.
- Every write runs inside a ``BEGIN IMMEDIATE`` transaction on the single writer
  connection, in a worker thread behind a ``CapacityLimiter(1)``: writers queue in trio,
  not in SQLite.
- Group commit: writes that arrive while another is committing are run together and
  committed by one ``COMMIT`` (one fsync); nobody's ``write`` returns before the
  ``COMMIT`` that contains it has returned, so an acknowledged write is durable. Whoever
  finds the writer free commits what is queued; the others wait for the writer to be free
  again, and the writes of a group are woken together when it is over (not one after the
  other through the limiter). How a group runs on the connection — savepoints, batched
  writes, the order of its writes — is :mod:`appliance.store.infra.group_commit`.
- Order is promised only by :meth:`Database.write_after_batched`: it sees every batched
  write queued before it (``threaded=False`` runs each write alone, in order of arrival,
  which keeps the promise).
- Reads use their own connections (WAL snapshots), also in worker threads.
- apsw errors are translated to :class:`~appliance.errors.StoreError` here and only here.
- ``threaded=False`` runs the same functions inline on the calling thread. Engine tests
  under trio's autojump ``MockClock`` use it: a thread hop would let virtual time race
  ahead while SQLite works (see docs/adr/0033).

Store functions have the shape ``fn(conn, ..., now) -> value`` and never commit themselves.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import apsw
import trio

from appliance.errors import SteepleError, StoreError
from appliance.store.infra.datadir import create_private_file
from appliance.store.infra.disk import SqliteDisk
from appliance.store.infra.group_commit import MAX_GROUP, PendingWrite, run_group
from appliance.store.infra.migrate import migrate
from appliance.store.infra.snapshot import snapshot_before_migration

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
Item = TypeVar("Item")  # an item of a batched write
BUSY_TIMEOUT_MS = 5000
# The writer's page cache (SQLite's default is 2 MiB). Every run row lands on random pages
# of job_runs' id and (schedule_id, scheduled_for) indexes and moves a cursor in a random
# schedules row; with 2 MiB most of those pages were read back from the OS for each pass
# (bench/HISTORY.md, "Planner, round two"). Pages are allocated as used, up to this bound.
WRITER_CACHE_KIB = 64 * 1024


def _connect(path: Path, vfs: str | None = None) -> apsw.Connection:
    conn = apsw.Connection(str(path), vfs=vfs)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _translate(exc: apsw.Error) -> StoreError:
    kinds = {
        apsw.FullError: "the disk is full",
        apsw.ReadOnlyError: "the database is read-only",
        apsw.IOError: "a disk I/O error occurred",
        apsw.CorruptError: "the database file is corrupt",
        apsw.BusyError: "the database stayed locked past the busy timeout",
    }
    for kind, text in kinds.items():
        if isinstance(exc, kind):
            return StoreError(f"{text} ({exc})")
    return StoreError(f"database error: {exc}")


def run_write(conn: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
    """Run ``fn`` inside one ``BEGIN IMMEDIATE`` transaction on ``conn``."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        if conn.in_transaction:  # a failed COMMIT may already have rolled back
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def _quick_check(conn: apsw.Connection, path: Path) -> None:
    try:
        rows = [row[0] for row in conn.execute("PRAGMA quick_check")]
    except apsw.Error as exc:
        raise StoreError(f"{path}: the database check failed: {_translate(exc)}") from exc
    if rows != ["ok"]:
        raise StoreError(f"{path}: the database check failed: {'; '.join(map(str, rows[:5]))}")


def run_read(conn: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
    """Run ``fn`` in one read transaction, so it sees a single snapshot. If ``fn`` fails,
    its error is what the caller sees (ending the transaction may fail too, e.g. on a
    damaged file, and must not mask it)."""
    conn.execute("BEGIN")
    try:
        result = fn(conn)
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(apsw.Error):
                conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class WalCheckpoint:
    """The last passive checkpoint: when, and how far it got (``/metrics``)."""

    at_ms: int
    wal_frames: int  # frames in the WAL when it ran
    checkpointed_frames: int  # of those, copied into the database file

    @property
    def held_back_frames(self) -> int:
        """Frames it could not copy: a reader's snapshot still needed them."""
        return max(0, self.wal_frames - self.checkpointed_frames)


class Database:
    """Steeple's database file. Build with :meth:`open`; close after the nursery exits."""

    def __init__(self, path: Path, *, readers: int, threaded: bool, vfs: str | None = None) -> None:
        self.sqlite_file = path  # only this store has one (docs/adr/0044-postgresql-store.md)
        self.disk = SqliteDisk(path)
        self.threaded = threaded
        self._writer = _connect(path, vfs)
        self._writer.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
        self._readers = [_connect(path, vfs) for _ in range(readers)]
        self._write_limiter = trio.CapacityLimiter(1)
        self._writer_free = trio.Event()  # set whenever nobody holds the writer
        self._writer_free.set()
        self._pending: list[PendingWrite[Any]] = []
        self.group_commits = 0  # transactions committed by ``write`` (for figures, metrics)
        self.grouped_writes = 0  # writes those transactions carried
        self._read_limiter = trio.CapacityLimiter(readers)
        self._committed = trio.Event()  # set, and replaced, after each commit by ``write``
        self.commits = 0  # transactions committed by ``write`` (``wait_for_commit`` wakes)
        self.round_trips = 0  # SQLite runs in this process: no server to wait for
        self.last_checkpoint: WalCheckpoint | None = None  # of this process (``checkpoint``)

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        readers: int = 2,
        threaded: bool = True,
        vfs: str | None = None,
        check: bool = True,
        migrate_schema: bool = True,
    ) -> Database:
        """Open (creating if needed), migrate and — unless ``check`` is False — check the
        file (``PRAGMA quick_check``). Blocking: call at boot. ``vfs`` names a registered
        SQLite VFS (the chaos tests' fault injector); None is SQLite's default. The
        appliance opens with ``check=False`` and runs :meth:`check` beside its services: the
        check reads the whole file (its time grows with the file), which must not delay the first
        delivery after a restart. A new file is created private (directory ``0700``,
        file ``0600``: :mod:`appliance.store.infra.datadir`). Before migrating a database that has
        a schema, a snapshot is kept in ``backups/`` beside it (the upgrade's rollback:
        :mod:`appliance.store.infra.snapshot`). ``migrate_schema=False`` leaves the schema as it is
        (operator commands that must work before a migration can)."""
        try:
            create_private_file(path)
            db = cls(path, readers=readers, threaded=threaded, vfs=vfs)
            if migrate_schema:
                snapshot = snapshot_before_migration(path, db._writer)
                if snapshot is not None:
                    log.warning("migrating %s; the schema before is kept in %s", path, snapshot)
                migrate(db._writer)
            if check:
                _quick_check(db._writer, path)
        except apsw.Error as exc:
            raise _translate(exc) from exc
        return db

    async def check(self) -> None:
        """``PRAGMA quick_check`` on a reader connection, off the event loop; raises
        StoreError naming the file if it finds damage."""
        await self.read(_quick_check, self.sqlite_file)

    def write_now(
        self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        """Run a write on the calling thread (boot, CLI, tests). Not from the trio loop."""

        def call(conn: apsw.Connection) -> T:
            return fn(conn, *args, **kw)

        try:
            return run_write(self._writer, call)
        except apsw.Error as exc:
            raise _translate(exc) from exc

    def read_now(
        self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        def call(conn: apsw.Connection) -> T:
            return fn(conn, *args, **kw)

        try:
            return run_read(self._readers[0], call)
        except apsw.Error as exc:
            raise _translate(exc) from exc

    async def write(
        self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        """Run ``fn`` in a write transaction off the event loop, serialised with every other
        write and group-committed with those waiting beside it. Returns once committed."""

        def bound(conn: apsw.Connection) -> T:
            return fn(conn, *args, **kw)

        return await self._submit(PendingWrite(call=bound))

    async def write_after_batched(
        self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        """:meth:`write`, promised to see every :meth:`write_batched` write queued before
        it: those are committed in an earlier transaction or earlier in its own, since a
        group runs its batches before such writes whatever their order of arrival (a
        batched write queued after it in the same group runs first too). The dispatcher's
        claim relies on it to count the runs its completions finished
        (docs/adr/0033-claim-queue-scheduling.md, "Claim"; the rules are
        :mod:`appliance.store.infra.group_commit`'s)."""

        def bound(conn: apsw.Connection) -> T:
            return fn(conn, *args, **kw)

        return await self._submit(PendingWrite(call=bound, after_batches=True))

    async def write_batched(
        self, fn: Callable[[apsw.Connection, Sequence[Item]], Sequence[T]], item: Item
    ) -> T:
        """Write ``item`` with ``fn`` (items in, one result per item out), in one call with
        the other items of ``fn`` waiting beside it, group-committed like :meth:`write`. If
        that call raises, each item is written alone: only a failing item raises here."""

        def alone(conn: apsw.Connection) -> T:
            (result,) = fn(conn, [item])
            return result

        return await self._submit(PendingWrite(call=alone, batch=fn, item=item))

    async def _submit(self, item: PendingWrite[T]) -> T:
        if not self.threaded:
            async with self._write_limiter:
                call = functools.partial(run_write, self._writer, item.call)
                result = await self._run(call)
            self._announce_commit()
            return result
        self._pending.append(item)
        try:
            while not item.taken:  # whoever finds the writer free commits for the queue
                if not self._write_limiter.available_tokens:
                    await self._writer_free.wait()
                    continue
                self._write_limiter.acquire_nowait()
                self._take_writer()
                try:
                    await self._commit_group()
                finally:
                    self._free_writer()
        finally:
            if not item.taken:  # cancelled while queued: it never runs
                self._pending.remove(item)
        assert item.done is not None
        if not item.done.is_set():
            await item.done.wait()  # in another's group: all its writers wake at once
        try:
            return item.outcome()
        except apsw.Error as exc:
            raise _translate(exc) from exc

    def _take_writer(self) -> None:
        """Just acquired the write limiter: the writer is no longer free."""
        if self._writer_free.is_set():
            self._writer_free = trio.Event()

    def _free_writer(self) -> None:
        self._write_limiter.release()
        if self._write_limiter.available_tokens:  # not handed on to a waiting checkpoint
            self._writer_free.set()

    async def _commit_group(self) -> None:
        group = self._pending[:MAX_GROUP]
        del self._pending[:MAX_GROUP]
        done = trio.Event()
        for item in group:
            item.taken = True
            item.done = done
        try:
            await trio.to_thread.run_sync(run_group, self._writer, group, abandon_on_cancel=False)
            self.group_commits += 1
            self.grouped_writes += len(group)
            self._announce_commit()
        except BaseException as exc:  # the transaction failed as a whole: so did every write
            for item in group:
                item.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            done.set()

    async def wait_for_commit(self) -> None:
        """Return after the next transaction committed by :meth:`write` in this process
        (the live event stream waits on it instead of polling)."""
        await self._committed.wait()

    def _announce_commit(self) -> None:
        self.commits += 1
        self._committed.set()
        self._committed = trio.Event()

    async def read(
        self, fn: Callable[Concatenate[apsw.Connection, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        """One read transaction on a reader connection, off the event loop."""
        async with self._read_limiter:
            conn = self._readers.pop()
            try:

                def bound(c: apsw.Connection) -> T:
                    return fn(c, *args, **kw)

                call = functools.partial(run_read, conn, bound)
                return await self._run(call)
            finally:
                self._readers.append(conn)

    async def _run(self, call: Callable[[], T]) -> T:
        try:
            if not self.threaded:
                return call()
            return await trio.to_thread.run_sync(call, abandon_on_cancel=False)
        except apsw.Error as exc:
            raise _translate(exc) from exc
        except SteepleError:
            raise

    async def checkpoint_wal(self, *, now_ms: int) -> WalCheckpoint:
        """:meth:`checkpoint` off the event loop, between writes: it uses the writer
        connection, which must never be used from two threads at once."""
        await self._write_limiter.acquire()
        self._take_writer()
        try:
            return await self._run(functools.partial(self.checkpoint, now_ms=now_ms))
        finally:
            self._free_writer()

    def checkpoint(self, *, now_ms: int) -> WalCheckpoint:
        """A passive WAL checkpoint (never blocks readers or the writer), remembered as
        :attr:`last_checkpoint`. Blocking, on the writer connection: from the trio loop use
        :meth:`checkpoint_wal`."""
        try:
            frames, copied = self._writer.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.Error as exc:
            raise _translate(exc) from exc
        done = WalCheckpoint(at_ms=now_ms, wal_frames=frames, checkpointed_frames=copied)
        self.last_checkpoint = done
        return done

    def close(self) -> None:
        for conn in [self._writer, *self._readers]:
            conn.close()
