"""The shape of a migrated schema, read the same way from SQLite (pragmas) and from
PostgreSQL (the catalogs), so that tests/store/test_pg_schema.py can compare the two stores'
migrations version by version; and the helpers that apply them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import apsw

from appliance.store.infra.migrate import migrations

ROWID_TABLES = {"api_keys", "signing_secrets", "job_runs"}
SQLITE_TYPES = {"INTEGER": "bigint", "TEXT": "text", "BLOB": "bytea"}
_CAST = re.compile(r"::[a-z ]+$")  # PostgreSQL spells a literal default 'x'::text


def _files(package: str) -> list[tuple[str, str]]:
    """A package's migrations/*.sql as (file name, sql), in name order."""
    folder = resources.files(package).joinpath("migrations")
    found = [(e.name, e.read_text(encoding="utf-8")) for e in folder.iterdir()]
    return sorted((name, sql) for name, sql in found if name.endswith(".sql"))


PG_FILES = _files("appliance.store.infra.postgres")
SQLITE_FILES = _files("appliance.store.infra")


@dataclass(frozen=True)
class Index:
    unique: bool
    partial: bool
    columns: tuple[str | None, ...]  # None: an expression; lower(x) for x COLLATE NOCASE
    descending: tuple[bool, ...]


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    not_null: bool
    default: str | None


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    foreign_keys: frozenset[tuple[tuple[str, ...], str, tuple[str, ...]]]
    uniques: frozenset[tuple[str, ...]]  # UNIQUE constraints' columns
    checks: int  # how many CHECK constraints (SQLite does not show their terms)
    indexes: dict[str, Index]


# -- SQLite ------------------------------------------------------------------------------


def sqlite_schema(conn: apsw.Connection) -> dict[str, Table]:
    names = [
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {name: _sqlite_table(conn, name) for name in names}


def _sqlite_table(conn: apsw.Connection, table: str) -> Table:
    info = conn.execute(f"PRAGMA table_info({table})").fetchall()
    columns = tuple(
        Column(
            name=str(name),
            type=SQLITE_TYPES[str(type_)],
            not_null=bool(notnull) or pk > 0,  # SQLite lets a rowid table's TEXT PK be NULL
            default=None if default is None else str(default),
        )
        for _, name, type_, notnull, default, pk in info
    )
    primary_key = tuple(
        str(row[1]) for row in sorted((r for r in info if r[5]), key=lambda r: r[5])
    )
    fks: dict[int, tuple[list[str], str, list[str]]] = {}
    for fk_id, _, parent, child_col, parent_col, *_ in conn.execute(
        f"PRAGMA foreign_key_list({table})"
    ):
        entry = fks.setdefault(int(fk_id), ([], str(parent), []))
        entry[0].append(str(child_col))
        entry[2].append(str(parent_col))
    indexes = {}
    uniques = set()
    for _, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})"):
        if origin == "u":
            cols = conn.execute(f"PRAGMA index_info({name})").fetchall()
            uniques.add(tuple(str(row[2]) for row in cols))
        if origin != "c":  # sqlite_autoindex_*: a PRIMARY KEY or UNIQUE constraint's own
            continue
        keys = [row for row in conn.execute(f"PRAGMA index_xinfo({name})") if row[5]]
        indexes[str(name)] = Index(
            unique=bool(unique),
            partial=bool(partial),
            columns=tuple(_sqlite_key(row[1], row[2], row[4]) for row in keys),
            descending=tuple(bool(row[3]) for row in keys),
        )
    return Table(
        columns=columns,
        primary_key=primary_key,
        foreign_keys=frozenset((tuple(a), parent, tuple(b)) for a, parent, b in fks.values()),
        uniques=frozenset(uniques),
        checks=_sqlite_checks(conn, table),
        indexes=indexes,
    )


def _sqlite_checks(conn: apsw.Connection, table: str) -> int:
    """CHECK clauses in the table's stored CREATE TABLE (ADD COLUMN appends to it)."""
    [(sql,)] = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchall()
    without_comments = re.sub(r"--[^\n]*", "", str(sql))
    return len(re.findall(r"\bCHECK\s*\(", without_comments, re.IGNORECASE))


def _sqlite_key(cid: int, name: str | None, collation: str) -> str | None:
    if cid == -2:
        return None
    # 0001's rule: NOCASE uniqueness is a unique index on lower(col) in PostgreSQL.
    return f"lower({name})" if collation.upper() == "NOCASE" else str(name)


def sqlite_at(conn: apsw.Connection, version: int) -> None:
    """Apply the SQLite migrations after the current version up to ``version``."""
    current = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
    for number, sql in migrations()[current:version]:
        with conn:
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {number}")


# -- PostgreSQL --------------------------------------------------------------------------

PG_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity, co.collname
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum
"""
_PG_CONSTRAINTS = """
SELECT c.relname, k.contype, k.confrelid::regclass::text,
       ARRAY(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY u(n, i)
             JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n ORDER BY u.i),
       ARRAY(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY u(n, i)
             JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n ORDER BY u.i)
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
WHERE k.contype IN ('p', 'f', 'u', 'c')
"""
# Indexes made by CREATE INDEX: those backing a PRIMARY KEY or UNIQUE constraint are left
# out, as SQLite's sqlite_autoindex_* are.
_PG_INDEXES = """
SELECT t.relname, ic.relname, i.indisunique, i.indpred IS NOT NULL,
       ARRAY(SELECT coalesce(a.attname, pg_get_indexdef(i.indexrelid, u.p::int, true))
             FROM unnest(i.indkey::int2[]) WITH ORDINALITY u(n, p)
             LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.n
             ORDER BY u.p),
       ARRAY(SELECT (o & 1) = 1 FROM unnest(i.indoption::int2[]) WITH ORDINALITY u(o, p)
             ORDER BY u.p)
FROM pg_index i
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = 'public'
WHERE NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
"""


def pg_schema(conn: Any) -> dict[str, Table]:
    columns: dict[str, list[Column]] = {}
    for table, name, type_, not_null, default, _, _ in conn.execute(PG_COLUMNS):
        columns.setdefault(table, [])
        if name == "rowid" and table in ROWID_TABLES:
            continue
        plain = None if default is None else _CAST.sub("", default)
        columns[table].append(Column(name, type_, not_null, plain))
    keys: dict[str, tuple[str, ...]] = {}
    fks: dict[str, set[tuple[tuple[str, ...], str, tuple[str, ...]]]] = {}
    uniques: dict[str, set[tuple[str, ...]]] = {}
    checks: dict[str, int] = {}
    for table, kind, parent, cols, parent_cols in conn.execute(_PG_CONSTRAINTS):
        if kind == "p":
            keys[table] = tuple(cols)
        elif kind == "f":
            fks.setdefault(table, set()).add((tuple(cols), parent, tuple(parent_cols)))
        elif kind == "c":
            checks[table] = checks.get(table, 0) + 1
        elif tuple(cols) != ("rowid",):  # job_runs' rowid index: PG-only (0001's header)
            uniques.setdefault(table, set()).add(tuple(cols))
    indexes: dict[str, dict[str, Index]] = {}
    for table, name, unique, partial, cols, desc in conn.execute(_PG_INDEXES):
        indexes.setdefault(table, {})[name] = Index(
            unique=unique,
            partial=partial,
            columns=tuple(_pg_key(key) for key in cols),
            descending=tuple(desc),
        )
    return {
        table: Table(
            columns=tuple(cols),
            primary_key=keys.get(table, ()),
            foreign_keys=frozenset(fks.get(table, ())),
            uniques=frozenset(uniques.get(table, ())),
            checks=checks.get(table, 0),
            indexes=indexes.get(table, {}),
        )
        for table, cols in columns.items()
    }


def _pg_key(key: str) -> str | None:
    """A column's name; an expression's text only for lower(col), else None (SQLite's
    pragmas do not show expressions)."""
    return key if re.fullmatch(r"\w+|lower\(\w+\)", key) else None


def pg_apply(conn: Any, sql: str) -> None:
    with conn.transaction():
        conn.execute(sql)


def assert_same(pg_tables: dict[str, Table], lite_tables: dict[str, Table], label: str) -> None:
    assert sorted(pg_tables) == sorted(lite_tables), f"{label}: tables differ"
    for name in sorted(lite_tables):
        assert pg_tables[name] == lite_tables[name], f"{label}: table {name} differs"
