"""The PostgreSQL store: the same store functions, many replicas, one database.

Rules this module guards (docs/adr/0044-postgresql-store.md):
- Sync psycopg 3 on a ``psycopg_pool.ConnectionPool``, called through
  ``trio.to_thread.run_sync`` behind a limiter equal to the pool size — the shape of the
  SQLite store's worker threads (psycopg's async API is asyncio-only).
- Every write runs ``SERIALIZABLE``: the store functions were written for one writer at a
  time, and serializable transactions keep that meaning with N replicas writing at once.
  A transaction PostgreSQL aborts as a serialization failure or deadlock is run again from
  the start (the functions are pure apart from their connection), up to
  :data:`MAX_ATTEMPTS` times.
- Reads run ``REPEATABLE READ READ ONLY``: one snapshot, never aborted.
- ``statement_timeout`` bounds any statement trio cannot cancel.
- psycopg errors become :class:`~appliance.errors.StoreError` here and only here.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import psycopg
import psycopg_pool
import trio
from psycopg import errors as pg_errors

from appliance.errors import StoreError
from appliance.store.postgres.connection import PgConnection, configure
from appliance.store.postgres.migrate import migrate

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
MAX_ATTEMPTS = 20  # runs of one transaction PostgreSQL keeps aborting as a conflict
STATEMENT_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10.0
_RETRIED = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_WRITE = "BEGIN ISOLATION LEVEL SERIALIZABLE"
_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def is_postgres_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


def redacted(url: str) -> str:
    """``url`` without its password, for logs and errors."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    host = info.get("host", "localhost")
    port = info.get("port", "5432")
    return f"postgresql://{info.get('user', '')}@{host}:{port}/{info.get('dbname', '')}"


def _translate(exc: psycopg.Error, url: str) -> StoreError:
    if isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout)):
        return StoreError(f"the database {redacted(url)} is unreachable ({exc})")
    return StoreError(f"database error: {exc}")


class PgDatabase:
    """A PostgreSQL database. Build with :meth:`open`; close after the nursery exits."""

    path: Path | None = None  # no file: backups and checkpoints are PostgreSQL's
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
        self.retried = 0  # transactions run again after a serialization failure

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

    def _transact(self, begin: str, fn: Callable[[PgConnection], T]) -> T:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with self._pool.connection() as raw:
                    return _in_transaction(raw, begin, fn)
            except _RETRIED:
                if attempt == MAX_ATTEMPTS:
                    raise
                self.retried += 1
                time.sleep(min(0.001 * 2**attempt, 0.1))  # a worker thread, off the loop
        raise AssertionError("unreachable")

    def _call(self, begin: str, fn: Callable[[PgConnection], T]) -> T:
        try:
            return self._transact(begin, fn)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise _translate(exc, self.url) from exc

    def write_now(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """Run a write on the calling thread (boot, CLI, tests). Not from the trio loop."""
        return self._call(_WRITE, lambda conn: fn(conn, *args, **kw))

    def read_now(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        return self._call(_READ, lambda conn: fn(conn, *args, **kw))

    async def write(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """Run ``fn`` in a serializable transaction off the event loop; returns once
        committed."""
        result = await self._run(
            functools.partial(self._call, _WRITE, lambda conn: fn(conn, *args, **kw))
        )
        self.group_commits += 1
        self.grouped_writes += 1
        self._announce_commit()
        return result

    async def read(self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """One read-only snapshot transaction, off the event loop."""
        return await self._run(
            functools.partial(self._call, _READ, lambda conn: fn(conn, *args, **kw))
        )

    async def _run(self, call: Callable[[], T]) -> T:
        if not self.threaded:
            return call()
        async with self._limiter:
            return await trio.to_thread.run_sync(call, abandon_on_cancel=False)

    async def check(self) -> None:
        """Reach the database (``/readyz``); raises StoreError when it cannot."""
        await self.read(_ping)

    async def wait_for_commit(self) -> None:
        """Return after the next transaction committed by :meth:`write` in this process."""
        await self._committed.wait()

    def _announce_commit(self) -> None:
        self._committed.set()
        self._committed = trio.Event()

    def database_now_ms(self) -> int:
        """The database's clock (``clock_timestamp()``) in epoch milliseconds. Blocking."""
        return self._call(_READ, _database_now_ms)

    def close(self) -> None:
        self._pool.close()


def _in_transaction(raw: psycopg.Connection[Any], begin: str, fn: Callable[[PgConnection], T]) -> T:
    raw.execute(begin)
    try:
        result = fn(PgConnection(raw))
    except BaseException:
        if not raw.closed:
            raw.execute("ROLLBACK")
        raise
    raw.execute("COMMIT")
    return result


def _ping(conn: PgConnection) -> None:
    conn.execute("SELECT 1").fetchone()


def _database_now_ms(conn: PgConnection) -> int:
    row = conn.execute("SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)")
    return int(row.fetchone()[0])
