"""Copy a SQLite store into an empty PostgreSQL one (``steeple migrate-store``).

The copy is generic: the tables and their columns are read from the SQLite file's schema
and copied in foreign-key order, every value as it is — ids, cursors, secrets, run and
event numbers — so idempotency keys, event cursors and API keys mean the same on both.
Rules this module guards (docs/scale-out.md, "Moving from SQLite to PostgreSQL"):

- All of it is ONE PostgreSQL transaction, opened by locking every table against writers:
  the target is found empty inside it, filled, its identity sequences set past the copied
  values, and the copy verified (row counts, and checksums of key columns) before the
  commit. Any failure rolls the whole copy back, leaving the target as it was.
- SQLite's implicit ``rowid`` orders rows in some queries; PostgreSQL's tables have an
  explicit ``rowid`` identity for them, which gets SQLite's value, so the order survives.
- Both schemas must have the same columns; a difference is refused, naming it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apsw
import psycopg

from appliance.errors import StoreError
from appliance.store.infra.database import Database
from appliance.store.infra.postgres.connection import PgConnection
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.infra.postgres.migrate import current_version, migrations

SCHEMA_TABLE = "steeple_schema"  # PostgreSQL's version bookkeeping: not a Steeple table
ROWID = "rowid"
# The columns whose checksum must agree on both sides after the copy, besides the counts
# (the rowid too where the table has one: the order of rows it gives must survive).
CHECKED: dict[str, tuple[str, ...]] = {
    "tenants": ("id", "name"),
    "api_keys": ("id", "key_hash", "revoked_at"),
    "signing_secrets": ("id", "secret", "expires_at"),
    "schedules": ("id", "version", "next_fire_at", "deleted_at"),
    "job_runs": ("id", "idempotency_key", "scheduled_for", "state", "attempt"),
    "attempts": ("run_id", "attempt", "outcome"),
    "events": ("seq", "id"),
    "users": ("id", "email", "password_hash"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    """One SQLite table as copied: its columns, its primary key, whether it has a rowid."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # the order rows are read and checksummed in
    has_rowid: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Copied:
    """One table after the copy: rows on each side, and the checksum both agreed on."""

    name: str
    source_rows: int
    target_rows: int
    checksum: str | None  # sha256 hex of CHECKED's columns; None for unchecked tables


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- the SQLite side ----------------------------------------------------------------------


def source_tables(lite: apsw.Connection) -> list[Table]:
    """Every table of the SQLite schema (SQLite's own excepted), parents before children."""
    listed = lite.execute(
        "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table'"
        " AND name NOT LIKE 'sqlite%' ORDER BY name"
    ).fetchall()
    tables: dict[str, Table] = {}
    parents: dict[str, set[str]] = {}
    for name, without_rowid in ((str(n), bool(wr)) for n, wr in listed):
        info = lite.execute(f"PRAGMA table_info({_q(name)})").fetchall()
        ranked = sorted((int(str(r[5])), str(r[1])) for r in info)
        key = tuple(column for rank, column in ranked if rank > 0)
        tables[name] = Table(
            name=name,
            columns=tuple(str(r[1]) for r in info),
            key=key or (ROWID,),
            has_rowid=not without_rowid,
        )
        fks = lite.execute(f"PRAGMA foreign_key_list({_q(name)})").fetchall()
        parents[name] = {str(r[2]) for r in fks} - {name}
    return [tables[name] for name in _parents_first(parents)]


def _parents_first(parents: dict[str, set[str]]) -> list[str]:
    done: list[str] = []
    todo = sorted(parents)
    while todo:
        ready = [n for n in todo if not parents[n] & set(todo)]
        if not ready:
            raise StoreError(f"the foreign keys of {', '.join(todo)} form a cycle")
        done.extend(ready)
        todo = [n for n in todo if n not in ready]
    return done


def source_counts(lite: apsw.Connection, tables: list[Table]) -> dict[str, int]:
    return {t.name: _lite_scalar(lite, f"SELECT count(*) FROM {_q(t.name)}") for t in tables}


def _lite_scalar(lite: apsw.Connection, sql: str) -> int:
    row = lite.execute(sql).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def _autoincrement_floors(lite: apsw.Connection) -> dict[str, int]:
    """The highest value each AUTOINCREMENT table ever handed out (events.seq): the
    sequence continues after it, so a deleted newest event's number is never reused."""
    exists = lite.execute("SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_sequence'").fetchone()
    if exists is None:
        return {}
    return {str(n): int(s) for n, s in lite.execute("SELECT name, seq FROM sqlite_sequence")}


def _read(lite: apsw.Connection, table: Table, columns: Iterable[str]) -> Iterator[Any]:
    listed = ", ".join(map(_q, columns))
    order = ", ".join(map(_q, table.key))
    return iter(lite.execute(f"SELECT {listed} FROM {_q(table.name)} ORDER BY {order}"))


# --- the PostgreSQL side ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What the target database holds before the copy."""

    version: int  # its schema version (0: none)
    rows: dict[str, int]  # rows of each of its tables (besides the version's)


def survey_target(conn: PgConnection) -> Target:
    """The target's schema version and rows per table (any table of its schema)."""
    raw = conn.raw
    return Target(version=current_version(raw), rows=_target_counts(raw))


def _target_tables(raw: psycopg.Connection[Any]) -> list[str]:
    rows = raw.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_type = 'BASE TABLE' AND table_name <> %s ORDER BY table_name",
        (SCHEMA_TABLE,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def _target_counts(raw: psycopg.Connection[Any]) -> dict[str, int]:
    return {name: _scalar(raw, f"SELECT count(*) FROM {_q(name)}") for name in _target_tables(raw)}


def _scalar(raw: psycopg.Connection[Any], sql: str) -> int:
    row = raw.execute(sql.encode()).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def _target_columns(raw: psycopg.Connection[Any], name: str) -> dict[str, bool]:
    """Column name -> whether it is an identity."""
    rows = raw.execute(
        "SELECT column_name, is_identity FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s",
        (name,),
    ).fetchall()
    return {str(c): identity == "YES" for c, identity in rows}


def refuse_unless_empty(target: Target, shown: str) -> None:
    full = {name: n for name, n in target.rows.items() if n}
    if full:
        listed = ", ".join(f"{name}: {n} row{'s' * (n != 1)}" for name, n in sorted(full.items()))
        raise StoreError(
            f"the target {shown} is not empty: {listed}; migrate-store copies into an empty"
            " database only (create a new one, or drop this one's tables)"
        )


# --- the copy -----------------------------------------------------------------------------


def copy_store(conn: PgConnection, lite: apsw.Connection, *, shown: str) -> list[Copied]:
    """Copy every table of ``lite`` into the (migrated, empty) target; verify; return the
    counts. Runs inside the caller's PostgreSQL transaction, which a failure rolls back."""
    raw = conn.raw
    tables = source_tables(lite)
    raw.execute(f"LOCK TABLE {', '.join(_q(t.name) for t in tables)} IN EXCLUSIVE MODE")
    # The lock waited at most the store's statement timeout; reading and checking big
    # tables may take longer than that.
    raw.execute("SET LOCAL statement_timeout = 0")
    refuse_unless_empty(Target(version=0, rows=_target_counts(raw)), shown)
    floors = _autoincrement_floors(lite)
    counts = source_counts(lite, tables)
    identities = {table.name: _matching_columns(raw, table) for table in tables}
    for table in tables:
        found = identities[table.name]
        _copy_table(raw, lite, table, identities=found)
        # An AUTOINCREMENT column (events.seq) continues after SQLite's highest ever.
        floor = floors.get(table.name, 0)
        _set_sequences(raw, table.name, [c for c in found if c != ROWID], floor=floor)
        _set_sequences(raw, table.name, [c for c in found if c == ROWID], floor=0)
    return [
        _verify(raw, lite, table, counts[table.name], identities=identities[table.name])
        for table in tables
    ]


def _matching_columns(raw: psycopg.Connection[Any], table: Table) -> list[str]:
    """Refuse a table whose columns differ between the schemas; return the target's
    identity columns."""
    target = _target_columns(raw, table.name)
    extra = set(target) - set(table.columns) - ({ROWID} if table.has_rowid else set())
    missing = set(table.columns) - set(target)
    if missing or extra:
        raise StoreError(
            f"table {table.name} differs between the schemas (only in SQLite: "
            f"{sorted(missing)}; only in PostgreSQL: {sorted(extra)}): both must be at the"
            " same schema version of the same Steeple"
        )
    return sorted(name for name, identity in target.items() if identity)


def _copied_columns(table: Table, identities: list[str]) -> tuple[str, ...]:
    """SQLite's columns, and its implicit rowid where the target keeps one."""
    return ((ROWID,) if ROWID in identities and ROWID not in table.columns else ()) + table.columns


def _copy_table(
    raw: psycopg.Connection[Any], lite: apsw.Connection, table: Table, *, identities: list[str]
) -> None:
    """``COPY … FROM STDIN``: it writes identity columns as given (as ``OVERRIDING SYSTEM
    VALUE`` would), and is several times faster than row-by-row inserts."""
    columns = _copied_columns(table, identities)
    statement = f"COPY {_q(table.name)} ({', '.join(map(_q, columns))}) FROM STDIN"
    try:
        with raw.cursor() as cursor, cursor.copy(statement.encode()) as copy:
            for row in _read(lite, table, columns):
                copy.write_row(row)
    except psycopg.Error as exc:
        raise StoreError(f"copying table {table.name} failed: {exc}") from exc


def _set_sequences(
    raw: psycopg.Connection[Any], name: str, identities: list[str], *, floor: int
) -> None:
    """Each identity continues after the highest value copied (or SQLite handed out)."""
    for column in identities:
        top = max(_scalar(raw, f"SELECT max({_q(column)}) FROM {_q(name)}"), floor)
        raw.execute(
            "SELECT setval(pg_get_serial_sequence(%s, %s), %s, %s)",
            (_q(name), column, max(top, 1), top > 0),
        )


def _verify(
    raw: psycopg.Connection[Any],
    lite: apsw.Connection,
    table: Table,
    expected: int,
    *,
    identities: list[str],
) -> Copied:
    copied = _scalar(raw, f"SELECT count(*) FROM {_q(table.name)}")
    if copied != expected:
        raise StoreError(f"table {table.name}: {expected} rows in SQLite, {copied} copied")
    checked = CHECKED.get(table.name)
    if checked is None:
        return Copied(name=table.name, source_rows=expected, target_rows=copied, checksum=None)
    columns = _copied_columns(table, identities)[:1] if ROWID in identities else ()
    columns += checked
    source = _digest(_read(lite, table, columns))
    listed = ", ".join(map(_q, columns))
    order = ", ".join(map(_q, table.key))
    with raw.cursor(name=f"checksum_{table.name}") as rows:  # server-side: streamed
        rows.execute(f"SELECT {listed} FROM {_q(table.name)} ORDER BY {order}".encode())
        target = _digest(rows)
    if source != target:
        raise StoreError(
            f"table {table.name}: the copy's {', '.join(checked)} differ from SQLite's"
        )
    return Copied(name=table.name, source_rows=expected, target_rows=copied, checksum=source)


def _digest(rows: Iterable[Any]) -> str:
    """A checksum of rows that is the same for SQLite's and psycopg's values."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(
            repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)).encode()
        )
        digest.update(b"\n")
    return digest.hexdigest()


# --- entry points: a SQLite store to a PostgreSQL one -------------------------------------


def schema_version() -> int:
    """The version this Steeple's PostgreSQL migrations reach."""
    return len(migrations())


def count_source(lite: Database) -> dict[str, int]:
    """Rows per table of the SQLite store, parents first (what a copy would write)."""
    return lite.read_now(lambda conn: source_counts(conn, source_tables(conn)))


def check_target(url: str, *, shown: str, version: int) -> None:
    """Refuse a target with rows, or at a schema newer than ``version``. Looks without
    migrating: a refused target is left exactly as it was."""
    pg = PgDatabase.open(url, pool_size=1, migrate_schema=False)
    try:
        target = pg.read_now(survey_target)
    finally:
        pg.close()
    if target.version > version:
        raise StoreError(
            f"the target {shown} is at schema version {target.version}, newer than the"
            f" source's ({version}): it is not an empty database"
        )
    refuse_unless_empty(target, shown)


def copy_to(lite: Database, url: str, *, shown: str) -> list[Copied]:
    """Migrate the schema of the database at ``url``, then copy ``lite`` (read in one
    snapshot) into it in one transaction."""
    pg = PgDatabase.open(url, pool_size=1)
    try:
        return lite.read_now(lambda conn: pg.write_now(copy_store, conn, shown=shown))
    finally:
        pg.close()
