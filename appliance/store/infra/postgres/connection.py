"""A psycopg connection that store functions can use as they use SQLite's.

:class:`PgConnection` is the :class:`~appliance.store.infra.connection.Connection` of the
PostgreSQL store: each statement goes through
:func:`~appliance.store.infra.postgres.dialect.to_postgres`,
Python booleans are bound as 0/1 (the schema's flags are integers, as in SQLite), and
``numeric`` results (PostgreSQL's ``sum`` of ``bigint``) come back as ``int`` when whole.

It counts its **round trips** (:attr:`PgConnection.round_trips`): each time the client
waits for the server's answer. psycopg makes one per ``execute`` (two the time it
prepares the statement: ``Parse`` waits for its answer before ``Bind``/``Execute``), and
one per ``executemany``, which it sends as one pipeline (one ``Sync``, one wait); a
transaction's ``BEGIN`` rides in its first statement's pipeline. It
counts the **statements** the server executes too (:attr:`PgConnection.statements`): an
``executemany`` is one per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import psycopg
from psycopg.adapt import Loader

from appliance.store.infra.postgres.dialect import to_postgres


class _NumericLoader(Loader):
    """``numeric`` as ``int`` when it is whole (``sum(bigint)``), else ``float``."""

    def load(self, data: Buffer) -> int | float:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


Buffer = bytes | bytearray | memoryview


def configure(raw: psycopg.Connection[Any]) -> None:
    """Adapt ``raw`` once, when the pool opens it."""
    raw.adapters.register_loader("numeric", _NumericLoader)


class _Listed(list[Any]):
    """Rows already read (an ``executemany`` with ``RETURNING``)."""

    def fetchone(self) -> Any:
        return self.pop(0) if self else None

    def fetchall(self) -> list[Any]:
        rows = list(self)
        self.clear()
        return rows

    def getdescription(self) -> tuple[tuple[str, None], ...]:
        return self.columns

    columns: tuple[tuple[str, None], ...] = ()


class _Rows:
    """One statement's rows (none for a statement that returns none)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def __iter__(self) -> Iterator[Any]:
        if self._cursor.description is None:
            return iter(())
        return iter(self._cursor)

    def fetchone(self) -> Any:
        return None if self._cursor.description is None else self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return [] if self._cursor.description is None else self._cursor.fetchall()

    def getdescription(self) -> tuple[tuple[str, None], ...]:
        """The columns' names, as apsw's cursor gives them (no declared types)."""
        return tuple((column.name, None) for column in self._cursor.description or ())


def _bind(params: Any) -> Any:
    if params is None:
        return ()
    if isinstance(params, Mapping):
        return {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}
    return [int(v) if isinstance(v, bool) else v for v in params]


class PgConnection:
    """One pooled connection, inside a transaction the store opened.

    The transaction's opening statements (``begin``) are sent with its first statement,
    in one pipeline: one round trip for both. :attr:`raw` sends them first, for a caller
    that talks to psycopg directly."""

    __slots__ = ("_begin", "_changes", "_total", "pg", "round_trips", "statements", "xid")

    def __init__(self, raw: psycopg.Connection[Any], begin: Sequence[str] = ()) -> None:
        self.pg = raw  # as it is: nothing sent
        self._begin = tuple(begin)
        self._changes = 0
        self._total = 0
        self.round_trips = 0  # waits for the server's answer (the module's rules)
        self.statements = 0  # statements the server executed
        self.xid = 0  # the transaction's id, once begun, when ``begin`` asked for it

    @property
    def begun(self) -> bool:
        """Whether the opening statements were sent."""
        return not self._begin

    @property
    def raw(self) -> psycopg.Connection[Any]:
        """The psycopg connection, inside the transaction (begun now if it was not)."""
        if self._begin:
            self._begin_with(None, "", None)
        return self.pg

    def _begin_with(self, cursor: psycopg.Cursor[Any] | None, sql: str, params: Any) -> None:
        """Send the opening statements, then ``sql`` on ``cursor`` (if any), in one
        pipeline; learn the transaction's id if the last opening statement returns it."""
        begin, self._begin = self._begin, ()
        with self.pg.pipeline():
            opened = [self.pg.execute(statement) for statement in begin]
            if cursor is not None:
                cursor.execute(sql, params)
        self.round_trips += 1
        self.statements += len(begin) + (cursor is not None)
        if opened and opened[-1].description is not None:
            self.xid = int(opened[-1].fetchone()[0])  # type: ignore[index]

    def execute(self, statements: str, bindings: Any = None, /) -> _Rows:
        cursor = self.pg.cursor()
        sql, params = to_postgres(statements), _bind(bindings)
        if self._begin:
            self._begin_with(cursor, sql, params)
        else:
            prepared = _prepared(self.pg)
            cursor.execute(sql, params)
            self.round_trips += 1 + _prepared(self.pg) - prepared
            self.statements += 1
        if (changed := _changed_by(cursor.statusmessage)) is not None:
            self._changed(changed)
        return _Rows(cursor)

    def executemany(self, statements: str, sequenceofbindings: Iterable[Any], /) -> _Rows | _Listed:
        """Every binding in turn; with ``RETURNING``, the rows of all of them (as apsw)."""
        cursor = self.raw.cursor()  # begun first, if it was not
        batch: Sequence[Any] = [_bind(b) for b in sequenceofbindings]
        returned = _Listed()
        if not batch:
            return returned
        returning = "RETURNING" in statements.upper()
        cursor.executemany(to_postgres(statements), batch, returning=returning)
        self.round_trips += 1 if PIPELINED else len(batch)
        self.statements += len(batch)
        if _changed_by(cursor.statusmessage) is not None:
            self._changed(max(cursor.rowcount, 0))  # summed over the batch
        if not returning:
            return _Rows(cursor)
        while True:
            if cursor.description is not None:
                returned.columns = tuple((column.name, None) for column in cursor.description)
                returned.extend(cursor.fetchall())
            if not cursor.nextset():
                return returned

    def _changed(self, rows: int) -> None:
        self._changes = rows
        self._total += rows

    def changes(self) -> int:
        return self._changes

    def total_changes(self) -> int:
        return self._total


# psycopg sends an ``executemany`` as one pipeline where libpq supports it (libpq 14+).
PIPELINED: Final = psycopg.Pipeline.is_supported()


def _prepared(raw: psycopg.Connection[Any]) -> int:
    """Statements psycopg has prepared on ``raw`` so far (each ``Parse`` outside a pipeline
    cost a round trip of its own). psycopg keeps the number in its prepare manager, the
    only place it is known."""
    return int(raw._prepared._prepared_idx)


def _changed_by(status: str | None) -> int | None:
    """Rows an INSERT, UPDATE or DELETE changed, from its command tag; None for any other
    statement (which leaves :meth:`PgConnection.changes` as it was, as in SQLite)."""
    verb, _, rest = (status or "").partition(" ")
    if verb not in ("INSERT", "UPDATE", "DELETE", "MERGE"):
        return None
    return int(rest.split()[-1])
