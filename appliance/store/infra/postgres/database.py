"""The PostgreSQL store: the same store functions, many replicas, one database.

Rules this module guards (docs/adr/0044-postgresql-store.md):
- Sync psycopg 3 on a ``psycopg_pool.ConnectionPool``, called through
  ``trio.to_thread.run_sync`` behind a limiter equal to the pool size — the shape of the
  SQLite store's worker threads (psycopg's async API is asyncio-only).
- A write runs at the isolation its store function declares
  (:func:`~appliance.store.infra.connection.isolation_of`): ``SERIALIZABLE`` unless it is
  declared safe under ``READ COMMITTED`` (the claims, completions, heartbeats: ADR 0044
  lists which, and why). A transaction PostgreSQL aborts as a serialization failure or
  deadlock is run again from the start (the functions are pure apart from their
  connection), up to :data:`MAX_ATTEMPTS` times.
- Reads run ``REPEATABLE READ READ ONLY``: one snapshot, never aborted.
- ``statement_timeout`` bounds any statement trio cannot cancel.
- **An outage is waited out.** When the server cannot be reached, or drops the connection
  before ``COMMIT`` was sent (a restart, a failover, a network cut), the transaction is
  run again on a new connection, with backoff, for up to
  :data:`~appliance.store.infra.postgres.outage.OUTAGE_S`; a replica's services stall
  meanwhile instead of stopping the process.
- **A commit whose answer was lost is looked up, never guessed.** Every write transaction
  learns its transaction id first (``txid_current()``, sent with ``BEGIN`` in its first
  statement's round trip).
  When the connection is lost during ``COMMIT``, the store asks the server, once it
  answers again, what became of that id (``txid_status``): committed — the result stands;
  aborted — the transaction runs again. Only a status the server no longer keeps raises
  :class:`CommitUnknown`.
- **Round trips are counted** (:attr:`PgDatabase.round_trips`): every wait for the
  server's answer a transaction made, ``BEGIN`` and ``COMMIT`` (or ``ROLLBACK``) included,
  runs that were aborted and run again included (:mod:`~appliance.store.infra.postgres.connection`
  counts the statements'). The figure the benchmarks divide by deliveries.
- psycopg errors become :class:`~appliance.errors.StoreError` here and only here.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, cast

import psycopg
import psycopg_pool
import trio
from psycopg import errors as pg_errors

from appliance.errors import StoreError
from appliance.store.infra.connection import Isolation, isolation_of
from appliance.store.infra.disk import SERVER_DISK
from appliance.store.infra.postgres.batches import Batches
from appliance.store.infra.postgres.connection import PgConnection, configure
from appliance.store.infra.postgres.migrate import migrate
from appliance.store.infra.postgres.outage import Outage, unreachable
from appliance.store.infra.postgres.urls import redacted

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
Item = TypeVar("Item")  # an item of a batched write
MAX_ATTEMPTS = 20  # runs of one transaction PostgreSQL keeps aborting as a conflict
STATEMENT_TIMEOUT_MS = 30_000
WAKE_CHANNEL = "steeple_wake"  # LISTEN/NOTIFY: "look for work now" (a hint)
CONNECT_TIMEOUT_S = 10.0
_RETRIED = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
Begin = tuple[str, ...]  # the statements that open a transaction
_WRITE: Final = {
    level: (f"BEGIN ISOLATION LEVEL {level.value}", "SELECT txid_current()") for level in Isolation
}
_READ: Final = ("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",)


class CommitUnknown(StoreError):
    """The connection was lost while ``COMMIT`` was on its way: it may have committed."""


class _CommitLost(Exception):
    """The connection was lost during ``COMMIT`` of transaction ``xid``, whose function had
    returned ``result``: what happened is the server's to say (``txid_status``)."""

    def __init__(self, xid: int, result: Any, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.xid, self.result, self.cause = xid, result, cause


class _LostBeforeCommit(Exception):
    """The server went away before ``COMMIT`` was sent: nothing was committed."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _translate(exc: psycopg.Error, url: str) -> StoreError:
    if isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout)):
        return StoreError(f"the database {redacted(url)} is unreachable ({exc})")
    return StoreError(f"database error: {exc}")


class PgDatabase:
    """A PostgreSQL database. Build with :meth:`open`; close after the nursery exits."""

    disk = SERVER_DISK  # no file: its disk, WAL and backups are PostgreSQL's
    last_checkpoint = None

    def __init__(self, url: str, *, pool_size: int, threaded: bool) -> None:
        self.url = url
        self.threaded = threaded
        self.pool_size = pool_size
        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=pool_size,
            max_size=pool_size,
            open=False,
            configure=self._configure,
            kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT_S)},
            timeout=CONNECT_TIMEOUT_S,
        )
        self._limiter = trio.CapacityLimiter(pool_size)
        self._committed = trio.Event()
        self.group_commits = 0  # transactions committed by ``write`` (for figures, metrics)
        self.grouped_writes = 0
        self.commits = 0  # transactions committed by ``write`` (``wait_for_commit`` wakes)
        self.retried = 0  # transactions run again after a serialization failure
        self._batched_in_flight: set[trio.Event] = set()  # ``write_after_batched`` waits
        self._tally = _Tally()
        self._batches = Batches(self._write_batch)

    @property
    def round_trips(self) -> int:
        """Round trips to the server this process's transactions made so far."""
        return self._tally.round_trips

    @property
    def statements(self) -> int:
        """Statements the server executed for this process's transactions so far (an
        ``executemany`` one per row, a ``BEGIN`` one)."""
        return self._tally.statements

    @staticmethod
    def _configure(raw: psycopg.Connection[Any]) -> None:
        configure(raw)
        raw.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        raw.execute("SET TIME ZONE 'UTC'")

    @classmethod
    def open(
        cls,
        url: str,
        *,
        pool_size: int = 4,
        threaded: bool = True,
        migrate_schema: bool = True,
        check: bool = True,  # accepted for the SQLite store's signature; nothing to check
    ) -> PgDatabase:
        """Connect, and migrate unless ``migrate_schema`` is False. Blocking: call at boot."""
        db = cls(url, pool_size=pool_size, threaded=threaded)
        try:
            db._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            if migrate_schema:
                with db._pool.connection() as raw:
                    migrate(raw)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            db._pool.close()
            raise _translate(exc, url) from exc
        except BaseException:
            db._pool.close()
            raise
        return db

    def _transact(self, begin: Begin, fn: Callable[[PgConnection], T]) -> T:
        conflicts = 0
        outage = Outage(self.url)
        while True:
            try:
                with self._pool.connection() as raw:
                    return _in_transaction(raw, begin, fn, self._tally)
            except _RETRIED:
                conflicts += 1
                if conflicts == MAX_ATTEMPTS:
                    raise
                self.retried += 1
                time.sleep(min(0.001 * 2**conflicts, 0.1))  # a worker thread, off the loop
            except _CommitLost as lost:
                if self._did_commit(lost, outage):
                    return cast(T, lost.result)
            except (_LostBeforeCommit, psycopg_pool.PoolTimeout, psycopg.OperationalError) as exc:
                cause = exc.cause if isinstance(exc, _LostBeforeCommit) else exc
                if not isinstance(exc, _LostBeforeCommit) and not unreachable(exc):
                    raise
                outage.wait(cause)

    def _did_commit(self, lost: _CommitLost, outage: Outage) -> bool:
        """Whether the transaction whose ``COMMIT`` lost its connection committed, asked
        of the server once it answers (False: it aborted, and may run again)."""
        while True:
            try:
                with self._pool.connection() as raw:
                    row = raw.execute("SELECT txid_status(%s)", (lost.xid,)).fetchone()
                    self._tally.add(1, 1)
            except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as exc:
                if not unreachable(exc):
                    raise
                outage.wait(exc)
                continue
            status = None if row is None else row[0]
            if status == "in progress":  # its backend is still finishing the commit
                time.sleep(0.05)
                continue
            if status in ("committed", "aborted"):
                log.warning("a commit lost its connection; the server says it %s", status)
                return bool(status == "committed")
            raise CommitUnknown(
                f"the connection was lost while committing, and the server no longer knows"
                f" transaction {lost.xid} ({lost.cause})"
            )

    def _call(self, begin: Begin, fn: Callable[[PgConnection], T]) -> T:
        try:
            return self._transact(begin, fn)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise _translate(exc, self.url) from exc

    def write_now(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """Run a write on the calling thread (boot, CLI, tests). Not from the trio loop."""
        return self._call(_begin_write(fn, *args, **kw), lambda conn: fn(conn, *args, **kw))

    def read_now(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        return self._call(_READ, lambda conn: fn(conn, *args, **kw))

    async def write(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """Run ``fn`` in a transaction at its declared isolation, off the event loop;
        returns once committed."""
        begin = _begin_write(fn, *args, **kw)
        result = await self._run(
            functools.partial(self._call, begin, lambda conn: fn(conn, *args, **kw))
        )
        self.group_commits += 1
        self.grouped_writes += 1
        self._announce_commit()
        return result

    async def _write_batch(self, fn: Callable[[Any, Sequence[Item]], Sequence[T]],
                           items: Sequence[Item]) -> Sequence[T]:  # fmt: skip
        results = await self.write(fn, items)
        self.grouped_writes += len(items) - 1
        return results

    async def write_after_batched(
        self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        """:meth:`write`, promised — as on SQLite — to see every :meth:`write_batched`
        write of this process queued before it: it waits until those are over (committed,
        or failed), then runs in a transaction of its own. Nothing is promised about other
        replicas' writes: theirs are serialized with it in either order (the dispatcher's
        claim, docs/adr/0033-claim-queue-scheduling.md "Claim", counts its own process's
        completions)."""
        for done in list(self._batched_in_flight):
            await done.wait()
        return await self.write(fn, *args, **kw)

    async def write_batched(
        self, fn: Callable[[Any, Sequence[Item]], Sequence[T]], item: Item
    ) -> T:
        """Write ``item`` with ``fn`` (items in, one result per item out), with the items
        of ``fn`` that waited together, in one transaction
        (:class:`~appliance.store.infra.postgres.batches.Batches`)."""
        done = trio.Event()  # registered before the first checkpoint: "queued" from here
        self._batched_in_flight.add(done)
        try:
            return cast(T, await self._batches.write(fn, item))
        finally:
            self._batched_in_flight.discard(done)
            done.set()

    async def read(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """One read-only snapshot transaction, off the event loop. A cancelled read is
        abandoned to its thread (it changes nothing): ``/readyz`` answers within its own
        timeout while a transaction waits out an outage."""
        return await self._run(
            functools.partial(self._call, _READ, lambda conn: fn(conn, *args, **kw)),
            abandon=True,
        )

    async def _run(self, call: Callable[[], T], *, abandon: bool = False) -> T:
        if not self.threaded:
            return call()
        async with self._limiter:
            return await trio.to_thread.run_sync(call, abandon_on_cancel=abandon)

    async def check(self) -> None:
        """Reach the database (``/readyz``); raises StoreError when it cannot."""
        await self.read(_ping)

    async def wait_for_commit(self) -> None:
        """Return after the next transaction committed by :meth:`write` in this process."""
        await self._committed.wait()

    def _announce_commit(self) -> None:
        self.commits += 1
        self._committed.set()
        self._committed = trio.Event()

    def database_now_ms(self) -> int:
        """The database's clock (``clock_timestamp()``) in epoch milliseconds. Blocking."""
        return self._call(_READ, _database_now_ms)

    async def announce(self) -> None:
        """Tell the other replicas that work changed (``NOTIFY``, a hint: see
        :mod:`appliance.store.infra.postgres.wakeups`). Its own statement, never inside a claim's
        or a completion's transaction; a database that is away is not waited for."""

        def send() -> None:
            with self._pool.connection(timeout=1.0) as raw:
                raw.execute(f"NOTIFY {WAKE_CHANNEL}")
                self._tally.add(1, 1)

        try:
            await self._run(send)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            log.info("could not tell the other replicas: %s", exc)

    def close(self) -> None:
        self._pool.close()


class _Tally:
    """Counts the pool's threads add to."""

    def __init__(self) -> None:
        self.round_trips = 0
        self.statements = 0
        self._lock = threading.Lock()

    def add(self, round_trips: int, statements: int) -> None:
        with self._lock:
            self.round_trips += round_trips
            self.statements += statements


def _begin_write(fn: Callable[..., Any], *args: Any, **kw: Any) -> Begin:
    return _WRITE[isolation_of(fn, *args, **kw)]


def _in_transaction(
    raw: psycopg.Connection[Any], begin: Begin, fn: Callable[[PgConnection], T], tally: _Tally
) -> T:
    """``fn`` between ``begin`` (sent with its first statement) and ``COMMIT``; its
    round trips added to ``tally``. A function that ran no statement sends nothing."""
    conn = PgConnection(raw, begin)
    try:
        result = fn(conn)
    except psycopg.OperationalError as exc:
        if unreachable(exc):  # the server rolled it back, if it ever began
            tally.add(conn.round_trips, conn.statements)
            raise _LostBeforeCommit(exc) from exc
        _roll_back(conn)
        tally.add(conn.round_trips, conn.statements)
        raise
    except BaseException:
        _roll_back(conn)
        tally.add(conn.round_trips, conn.statements)
        raise
    if not conn.begun:
        return result
    tally.add(conn.round_trips + 1, conn.statements + 1)  # and the commit
    try:
        raw.execute("COMMIT")
    except psycopg.OperationalError as exc:
        if unreachable(exc) and conn.xid:
            raise _CommitLost(conn.xid, result, exc) from exc
        raise
    return result


def _roll_back(conn: PgConnection) -> None:
    raw = conn.pg
    if conn.begun and not raw.closed and not raw.broken:
        # psycopg follows a ROLLBACK with DEALLOCATE ALL when it had prepared statements
        # (they may name objects the rollback dropped): a round trip of its own.
        extra = 1 if raw._prepared._names else 0
        conn.round_trips += 1 + extra
        conn.statements += 1 + extra
        raw.execute("ROLLBACK")


def _ping(conn: PgConnection) -> None:
    conn.execute("SELECT 1").fetchone()


def _database_now_ms(conn: PgConnection) -> int:
    # PostgreSQL's own clock, in its own words: past the dialect translator, which refuses
    # functions it does not know to mean the same in SQLite.
    row = conn.raw.execute("SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)")
    conn.round_trips += 1  # past PgConnection's count too
    conn.statements += 1
    found = row.fetchone()
    assert found is not None
    return int(found[0])
