"""The store the appliance runs on: SQLite (the default) or PostgreSQL (scale-out).

:class:`Store` is what the engine, API and UI may use of either; :func:`open_store`
chooses by the ``database`` setting — a file path, or a ``postgresql://`` URL
(docs/adr/0044-postgresql-store.md, docs/scale-out.md). What only SQLite has (its file,
WAL checkpoints, file backups) is :class:`~appliance.store.infra.database.Database`'s
alone, never an empty attribute of the other store; the operator's disk figures are
each store's :attr:`Store.disk`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from appliance.errors import StoreError
from appliance.store.infra.database import Database, WalCheckpoint
from appliance.store.infra.disk import Disk
from appliance.store.infra.postgres.urls import is_postgres_url

P = ParamSpec("P")
T = TypeVar("T")
Item = TypeVar("Item")


class Store(Protocol):
    """A migrated database: transactions run off the event loop, one snapshot each."""

    @property
    def disk(self) -> Disk:
        """Where its bytes are, as the operator's figures read them."""
        ...

    @property
    def last_checkpoint(self) -> WalCheckpoint | None: ...

    group_commits: int
    grouped_writes: int
    commits: int  # transactions committed by ``write`` in this process

    @property
    def round_trips(self) -> int:
        """Waits for the database server's answer this process made (SQLite, in process:
        none)."""
        ...

    def write_now(
        self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs
    ) -> T: ...

    def read_now(
        self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs
    ) -> T: ...

    async def write(
        self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs
    ) -> T: ...

    async def write_after_batched(
        self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs
    ) -> T:
        """:meth:`write`, after every :meth:`write_batched` write of this process queued
        before it: it sees what they wrote (docs/adr/0033-claim-queue-scheduling.md)."""
        ...

    async def write_batched(
        self, fn: Callable[[Any, Sequence[Item]], Sequence[T]], item: Item
    ) -> T:
        """Write ``item`` with ``fn`` (items in, one result per item out), batched with
        other items of ``fn`` where the store gains by it."""
        ...

    async def read(
        self, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kw: P.kwargs
    ) -> T: ...

    async def check(self) -> None: ...

    async def wait_for_commit(self) -> None: ...

    def close(self) -> None: ...


def open_store(
    target: str | Path, *, check: bool = True, migrate_schema: bool = True, pool_size: int = 8
) -> Store:
    """Open the store ``target`` names: a ``postgresql://`` URL (``pool_size``
    connections), or the path of a SQLite file in an existing directory; anything else is
    refused with a StoreError naming both forms. PostgreSQL needs the optional extra
    (``pip install 'steeple[postgres]'``); without it, a one-line StoreError says so."""
    if is_postgres_url(target):
        try:
            from appliance.store.infra.postgres.database import PgDatabase
        except ImportError as exc:
            raise StoreError(
                f"a postgresql:// database needs psycopg: pip install 'steeple[postgres]' ({exc})"
            ) from exc
        return PgDatabase.open(
            str(target), check=check, migrate_schema=migrate_schema, pool_size=pool_size
        )
    return Database.open(sqlite_file(target), check=check, migrate_schema=migrate_schema)


def sqlite_file(target: str | Path) -> Path:
    """``target`` as the SQLite file to open (created if missing), or a StoreError: a URL
    of another scheme (a mistyped ``postgresql://``) or a path that cannot be a file is
    never created as a database file."""
    text = str(target)
    if "://" in text:
        shown = text.split("://", 1)[0] + "://…"  # never the rest: it may hold a password
    elif not text or text != text.strip():
        shown = repr(text)
    elif Path(text).is_dir():
        shown = f"{text} (a directory)"
    elif not Path(text).parent.is_dir():
        shown = f"{text} (its directory {Path(text).parent} does not exist)"
    else:
        return Path(text)
    raise StoreError(
        "expected a postgresql://USER@HOST:PORT/DATABASE URL or the path of a SQLite file"
        f" in an existing directory, got {shown}"
    )
