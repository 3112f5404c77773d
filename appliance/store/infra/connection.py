"""What a store function may do with its connection, whichever database is behind it.

Store functions (``fn(conn, ..., now) -> value``) are written once, in SQLite's dialect
with ``?`` and ``:name`` parameters, and run on either store (docs/adr/0044-postgresql-store.md):
- SQLite: ``conn`` is the ``apsw.Connection`` itself (:mod:`appliance.store.infra.database`).
- PostgreSQL: ``conn`` is a :class:`~appliance.store.infra.postgres.connection.PgConnection`,
  which translates each statement once (:mod:`appliance.store.infra.postgres.dialect`).

Only the calls below are allowed: a function that needs anything else is SQLite-only and
lives in a module that says so (snapshots, WAL checkpoints, backups). Where the stores must
differ in what a statement says, the statement is an explicit :class:`Sql` pair, said on
a connection with :meth:`Sql.on` (or the claim's :func:`row_locks`), never chosen by the
URL and never rewritten behind the caller: PostgreSQL's translator converts placeholders
only, and refuses the SQLite-only forms a pair exists for.

A store function declares the isolation it needs on PostgreSQL (:func:`read_committed`,
:func:`isolation_by`); undeclared, it runs ``SERIALIZABLE``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

import apsw


class Rows(Protocol):
    """The result of one statement: iterate it, or fetch."""

    def __iter__(self) -> Iterator[Any]: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def getdescription(self) -> tuple[tuple[str, Any], ...]:
        """``(column name, declared type)`` per column."""
        ...


class Connection(Protocol):
    """A connection inside a transaction the store opened (store functions never commit)."""

    def execute(self, statements: str, bindings: Any = None, /) -> Rows: ...

    def executemany(self, statements: str, sequenceofbindings: Iterable[Any], /) -> Rows: ...

    def changes(self) -> int:
        """Rows changed by the last INSERT, UPDATE or DELETE."""
        ...

    def total_changes(self) -> int:
        """Rows changed since the connection opened."""
        ...


def on_sqlite(conn: Connection) -> bool:
    """Whether ``conn`` is the SQLite store's (an ``apsw.Connection``); otherwise it is
    PostgreSQL's. The one test a store function's SQL may depend on."""
    return isinstance(conn, apsw.Connection)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sql:
    """A statement, or a piece of one, that the two stores say differently: each side
    written out in its own dialect, both with ``?``/``:name`` parameters (the PostgreSQL
    side has only its placeholders converted). Both sides must mean the same; the
    contract suite runs every store test on both (docs/adr/0044-postgresql-store.md)."""

    sqlite: str
    postgres: str

    def on(self, conn: Connection) -> str:
        """The side ``conn``'s store speaks."""
        return self.sqlite if on_sqlite(conn) else self.postgres


@dataclass(frozen=True, slots=True, kw_only=True)
class Batched:
    """A statement over many rows of values, said by each store its own way: SQLite runs
    ``sqlite`` once per row (``executemany``: one prepared statement, in process);
    PostgreSQL runs ``postgres`` once, each of its ``?`` bound to one column's values as
    an array (``unnest``), so that the server executes one statement, not one per row.
    Both sides must mean the same for any rows."""

    sqlite: str
    postgres: str

    def run(self, conn: Connection, rows: Sequence[Sequence[object]]) -> Rows:
        """The statement over ``rows`` (each a tuple of the same columns)."""
        if on_sqlite(conn) or not rows:
            return conn.executemany(self.sqlite, rows)
        return conn.execute(self.postgres, [list(column) for column in zip(*rows, strict=True)])


def unnested(typed: str) -> str:
    """The rows a :class:`Batched` statement's PostgreSQL side reads, as a ``SELECT``
    list: one array parameter per column of ``typed`` (``"name type, …"``), unnested side
    by side, in the rows' order."""
    pairs = [column.split() for column in typed.split(", ")]
    return ", ".join(f"unnest(CAST(? AS {kind}[])) AS {name}" for name, kind in pairs)


SKIP_LOCKED: Final = " FOR UPDATE SKIP LOCKED"
ROW_LOCKS: Final = Sql(sqlite="", postgres=SKIP_LOCKED)


def row_locks(conn: Connection) -> str:
    """What a claim's pick of rows ends with on ``conn``'s store: on PostgreSQL,
    ``FOR UPDATE SKIP LOCKED``, so that replicas claiming at once pass over each other's
    rows instead of waiting for them; on SQLite nothing, its single writer has nothing to
    skip (docs/adr/0044-postgresql-store.md)."""
    return ROW_LOCKS.on(conn)


class Isolation(enum.Enum):
    """The isolation a write transaction runs at on PostgreSQL (SQLite's single writer
    serializes every write whatever this says)."""

    SERIALIZABLE = "SERIALIZABLE"
    READ_COMMITTED = "READ COMMITTED"


F = TypeVar("F", bound=Callable[..., Any])
_ISOLATION: Final = "__steeple_isolation__"


def read_committed(fn: F) -> F:
    """Declare the store function ``fn`` safe under ``READ COMMITTED``: every row it
    decides on is locked or fenced in the statement that writes it (its docstring says
    how). Undeclared functions run ``SERIALIZABLE`` (docs/adr/0044-postgresql-store.md)."""
    setattr(fn, _ISOLATION, Isolation.READ_COMMITTED)
    return fn


def isolation_by(rule: Callable[..., Isolation]) -> Callable[[F], F]:
    """Declare the isolation of the store function it decorates a rule over the call's
    arguments (``rule(*args, **kw)``, without the connection): for a function that is
    safe under ``READ COMMITTED`` for some inputs only."""

    def declare(fn: F) -> F:
        setattr(fn, _ISOLATION, rule)
        return fn

    return declare


def isolation_of(fn: Callable[..., Any], *args: Any, **kw: Any) -> Isolation:
    """The isolation the store function ``fn`` declared for a call with these arguments
    (``SERIALIZABLE`` unless it declared otherwise)."""
    declared = getattr(fn, _ISOLATION, Isolation.SERIALIZABLE)
    return declared if isinstance(declared, Isolation) else declared(*args, **kw)
