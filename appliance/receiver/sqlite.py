"""Keys in an SQLite database (stdlib ``sqlite3``): durable, shared by processes.

Two ways to use it, strongest first:

1. **Transactional** (:meth:`SqliteDeduper.once`): the key's done record is written in the
   same transaction as your effect, on :attr:`SqliteDeduper.connection`, and committed with
   it. A crash at any point leaves both or neither, so each key's effect happens exactly
   once — for effects that are rows in this database.
2. **Two-phase** (:meth:`claim` / :meth:`finish` / :meth:`release`, driven by
   :meth:`appliance.receiver.Receiver.receive`) for effects outside it: the table in
   :mod:`appliance.receiver.claims`. Never loses a delivery; repeats an effect only when
   the process dies between the effect and the done record, or a handler outlives its hold.

Every read-decide-write runs in one ``BEGIN IMMEDIATE`` transaction: SQLite's write lock
makes claims atomic across threads and processes. A claim that cannot get the lock within
``timeout_s`` raises :class:`DeliveryInProgress` (answer 409; Steeple retries) rather than
waiting on.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from appliance.receiver.claims import (
    DONE_RECORD,
    Claim,
    DeliveryInProgress,
    Record,
    Seen,
    State,
    check_hold,
    decide,
    in_progress_record,
    new_token,
)

TABLE = "steeple_idempotency_keys"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    " idempotency_key TEXT PRIMARY KEY,"
    " state TEXT NOT NULL CHECK (state IN ('in_progress', 'done')),"
    " token TEXT NOT NULL,"  # the holding handling's token; '' once done
    " expires_at INTEGER NOT NULL,"  # unix s when an in-progress hold ends; 0 once done
    " recorded_at INTEGER NOT NULL)"  # unix s of the last write, for prune()
)
_LEGACY_TABLE = "steeple_deliveries"  # keys the earlier one-phase helper recorded
_BUSY_RETRY_S = 1


class SqliteDeduper:
    """Two-phase key records and transactional :meth:`once` in an SQLite database.

    ``database`` is a file path (the deduper opens and closes its own connection) or your
    own ``sqlite3.Connection`` (keys live beside your tables; you close it). Threads share
    it: one lock serialises its use. Call :meth:`prune` now and then."""

    def __init__(
        self, database: str | Path | sqlite3.Connection, *, timeout_s: float = 5.0
    ) -> None:
        if isinstance(database, sqlite3.Connection):
            self.connection, self._owned = database, False
        else:
            # Autocommit mode: transactions are the explicit BEGIN IMMEDIATE ones below.
            self.connection = sqlite3.connect(
                database, timeout=timeout_s, isolation_level=None, check_same_thread=False
            )
            self._owned = True
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        with self._transaction() as conn:
            conn.execute(_SCHEMA)
            _adopt_legacy_keys(conn)

    @contextmanager
    def once(self, key: str, *, now_s: int) -> Iterator[bool]:
        """A transaction on :attr:`connection` that records ``key`` done; yields True if it
        was not done before. Make your effect's writes inside the block, on
        :attr:`connection`, and only when True: they commit together with the key, or roll
        back together if the block raises or the process dies. Do not commit inside.

        Raises :class:`DeliveryInProgress` if a two-phase handling holds the key, or another
        thread or process keeps the database locked beyond ``timeout_s``."""
        with self._transaction(busy_key=key) as conn:
            # decide()'s hold and token are unused here: the key goes straight to done.
            claim = decide(key, _read(conn, key), now_s=now_s, hold_s=1, token="")
            if claim.seen is Seen.IN_PROGRESS:
                raise DeliveryInProgress(key, retry_after_s=max(1, claim.expires_at_s - now_s))
            first = claim.seen is Seen.NEW
            if first:
                _write(conn, key, DONE_RECORD, now_s=now_s)
            yield first

    def claim(self, key: str, *, now_s: int, hold_s: int) -> Claim:
        check_hold(hold_s)
        with self._transaction(busy_key=key) as conn:
            claim = decide(key, _read(conn, key), now_s=now_s, hold_s=hold_s, token=new_token())
            if claim.seen is Seen.NEW:
                _write(conn, key, in_progress_record(claim), now_s=now_s)
            return claim

    def finish(self, claim: Claim, *, now_s: int) -> None:
        with self._transaction() as conn:
            _write(conn, claim.key, DONE_RECORD, now_s=now_s)

    def release(self, claim: Claim) -> None:
        with self._transaction() as conn:
            conn.execute(
                f"DELETE FROM {TABLE} WHERE idempotency_key = ? AND state = ? AND token = ?",
                (claim.key, State.IN_PROGRESS.value, claim.token),
            )

    def forget(self, key: str) -> None:
        with self._transaction() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE idempotency_key = ?", (key,))

    def prune(self, *, older_than_s: int) -> int:
        """Delete records last written before ``older_than_s`` (unix seconds) whose hold, if
        any, has ended too; returns how many. Keep keys longer than Steeple can retry a run:
        8 days covers the maximum window."""
        with self._transaction() as conn:
            cursor = conn.execute(
                f"DELETE FROM {TABLE} WHERE recorded_at < ?1 AND expires_at < ?1",
                (older_than_s,),
            )
            return cursor.rowcount

    def close(self) -> None:
        """Close the connection if the deduper opened it."""
        with self._lock:
            if self._owned:
                self.connection.close()

    def __enter__(self) -> SqliteDeduper:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self, *, busy_key: str | None = None) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on any exception) under the
        thread lock. With ``busy_key``, not getting the lock in time raises
        :class:`DeliveryInProgress` for that key instead of an ``OperationalError``."""
        if not self._lock.acquire(timeout=self._timeout_s):
            raise _busy(busy_key, sqlite3.OperationalError("deduper lock timed out"))
        try:
            conn = self.connection
            if conn.in_transaction:
                raise RuntimeError("SqliteDeduper needs its connection outside a transaction")
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                    raise
                raise _busy(busy_key, exc) from exc
            try:
                yield conn
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        finally:
            self._lock.release()


def _busy(key: str | None, cause: sqlite3.OperationalError) -> Exception:
    return cause if key is None else DeliveryInProgress(key, retry_after_s=_BUSY_RETRY_S)


def _read(conn: sqlite3.Connection, key: str) -> Record | None:
    row = conn.execute(
        f"SELECT state, token, expires_at FROM {TABLE} WHERE idempotency_key = ?", (key,)
    ).fetchone()
    if row is None:
        return None
    state, token, expires_at = row
    return Record(state=State(state), token=token, expires_at_s=expires_at)


def _write(conn: sqlite3.Connection, key: str, record: Record, *, now_s: int) -> None:
    conn.execute(
        f"INSERT INTO {TABLE} (idempotency_key, state, token, expires_at, recorded_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO UPDATE SET"
        " state = excluded.state, token = excluded.token,"
        " expires_at = excluded.expires_at, recorded_at = excluded.recorded_at",
        (key, record.state.value, record.token, record.expires_at_s, now_s),
    )


def _adopt_legacy_keys(conn: sqlite3.Connection) -> None:
    """Keys the one-phase helper recorded (``first_seen`` then handle) become done records,
    so an upgrade does not turn them into duplicates."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_LEGACY_TABLE,)
    ).fetchone()
    if found is None:
        return
    conn.execute(
        f"INSERT OR IGNORE INTO {TABLE} (idempotency_key, state, token, expires_at, recorded_at)"
        f" SELECT idempotency_key, 'done', '', 0, first_seen_at FROM {_LEGACY_TABLE}"
    )
    conn.execute(f"DROP TABLE {_LEGACY_TABLE}")
