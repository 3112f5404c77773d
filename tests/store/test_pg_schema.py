"""The PostgreSQL migrations (appliance/store/postgres/migrations) give, after every
version, the schema the SQLite migrations (appliance/store/migrations) give: the same
tables; the same columns in the same order, with matching types, nullability and
defaults; the same primary keys, foreign keys, UNIQUE constraints and number of CHECK
constraints; the same index names, each unique or not, partial or not, over the same
columns. A missing or drifting migration fails here.

Each PostgreSQL file is applied with raw psycopg in one transaction, as the runner does;
the SQLite side is migrated by appliance.store.migrate (apsw). The PG-only `rowid`
columns (0001's header says why) are checked by their own rules, not compared.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

import apsw
import pytest

from appliance.store.migrate import migrate, migrations

try:
    import psycopg
except ImportError:  # the pg_cluster fixture skips these tests, naming what is missing
    psycopg = None

ROWID_TABLES = {"api_keys", "signing_secrets", "job_runs"}
SQLITE_TYPES = {"INTEGER": "bigint", "TEXT": "text", "BLOB": "bytea"}
_CAST = re.compile(r"::[a-z ]+$")  # PostgreSQL spells a literal default 'x'::text


def _files(package: str) -> list[tuple[str, str]]:
    """A package's migrations/*.sql as (file name, sql), in name order."""
    folder = resources.files(package).joinpath("migrations")
    found = [(e.name, e.read_text(encoding="utf-8")) for e in folder.iterdir()]
    return sorted((name, sql) for name, sql in found if name.endswith(".sql"))


PG_FILES = _files("appliance.store.postgres")
SQLITE_FILES = _files("appliance.store")


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

_PG_COLUMNS = """
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
    for table, name, type_, not_null, default, _, _ in conn.execute(_PG_COLUMNS):
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


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Any]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def lite() -> Iterator[apsw.Connection]:
    conn = apsw.Connection(":memory:")
    conn.execute("PRAGMA foreign_keys=ON")
    yield conn
    conn.close()


def assert_same(pg_tables: dict[str, Table], lite_tables: dict[str, Table], label: str) -> None:
    assert sorted(pg_tables) == sorted(lite_tables), f"{label}: tables differ"
    for name in sorted(lite_tables):
        assert pg_tables[name] == lite_tables[name], f"{label}: table {name} differs"


# -- the tests ---------------------------------------------------------------------------


def test_every_sqlite_migration_has_a_postgres_twin_of_the_same_number_and_name() -> None:
    assert [name for name, _ in PG_FILES] == [name for name, _ in SQLITE_FILES]
    assert len(PG_FILES) == len(migrations())


def test_the_migrated_schemas_match(pg: Any, lite: apsw.Connection) -> None:
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    assert migrate(lite) == len(PG_FILES)
    assert_same(pg_schema(pg), sqlite_schema(lite), f"version {len(PG_FILES)}")


def test_each_version_applies_on_the_previous_and_matches_sqlites(
    pg: Any, lite: apsw.Connection
) -> None:
    for version, (name, sql) in enumerate(PG_FILES, start=1):
        pg_apply(pg, sql)
        sqlite_at(lite, version)
        assert_same(pg_schema(pg), sqlite_schema(lite), f"after {name}")


def test_the_translation_rules_hold(pg: Any) -> None:
    """0001's header: BIGINT integers, "C" text, identity rowids where queries read rowid."""
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    rowids = set()
    for table, name, type_, _, _, identity, collation in pg.execute(_PG_COLUMNS):
        assert type_ in {"bigint", "text", "bytea"}, f"{table}.{name} is {type_}"
        if type_ == "text":
            assert collation == "C", f"{table}.{name} collates {collation}"
        if name == "rowid":
            assert (type_, identity) == ("bigint", "a"), f"{table}.rowid: GENERATED ALWAYS"
            rowids.add(table)
    assert rowids == ROWID_TABLES
    # The claim joins job_runs by rowid: a unique index serves it.
    [(unique,)] = pg.execute(
        "SELECT bool_or(i.indisunique) FROM pg_index i JOIN pg_attribute a"
        " ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
        " WHERE i.indrelid = 'job_runs'::regclass AND a.attname = 'rowid' AND i.indnatts = 1"
    ).fetchall()
    assert unique


def _both(pg: Any, lite: apsw.Connection, sql: str, *args: Any) -> list[list[tuple[Any, ...]]]:
    """Run one statement on both databases; each one's rows (or its error's class name)."""
    results = []
    try:
        cursor = pg.execute(sql.replace("?", "%s"), args)
        results.append([tuple(row) for row in cursor.fetchall()] if cursor.description else [])
    except psycopg.IntegrityError:
        results.append([("error", "constraint")])
    try:
        results.append([tuple(row) for row in lite.execute(sql, args)])
    except apsw.ConstraintError:
        results.append([("error", "constraint")])
    return results


def test_text_sorts_bytewise_and_tenant_names_are_unique_ignoring_ascii_case(
    pg: Any, lite: apsw.Connection
) -> None:
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    migrate(lite)
    insert = "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)"
    names = ["b", "é", "Z", "_", "A", "ÉCOLE", "école"]  # NOCASE folds ASCII only
    for n, name in enumerate(names):
        pg_rows, lite_rows = _both(pg, lite, insert, f"ten_{n}", name)
        assert pg_rows == lite_rows == []
    assert _both(pg, lite, insert, "ten_acme", "acme") == [[], []]
    clash = [("error", "constraint")]
    assert _both(pg, lite, insert, "ten_ACME", "ACME") == [clash, clash]
    pg_rows, lite_rows = _both(pg, lite, "SELECT name FROM tenants ORDER BY name")
    assert pg_rows == lite_rows
    expected = sorted([*names, "acme"], key=lambda s: s.encode())
    assert [name for (name,) in pg_rows] == expected


def test_rowids_and_identities_count_up_in_insertion_order(pg: Any) -> None:
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    pg.execute("INSERT INTO tenants (id, name, created_at) VALUES ('ten_1', 'acme', 0)")
    for key_id in ("key_c", "key_a", "key_b"):  # ids out of order: rowid follows inserts
        pg.execute(
            "INSERT INTO api_keys (id, tenant_id, key_hash, created_at)"
            " VALUES (%s, 'ten_1', %s, 5)",
            (key_id, key_id),
        )
    rows = pg.execute("SELECT id FROM api_keys ORDER BY created_at, rowid").fetchall()
    assert [key_id for (key_id,) in rows] == ["key_c", "key_a", "key_b"]
    for n in range(2):
        pg.execute(
            "INSERT INTO events (id, tenant_id, type, occurred_at, data)"
            " VALUES (%s, 'ten_1', 'x', 0, '{}') RETURNING seq",
            (f"evt_{n}",),
        )
    seqs = [seq for (seq,) in pg.execute("SELECT seq FROM events ORDER BY id")]
    assert seqs == sorted(seqs) and len(set(seqs)) == 2


_SEED = [
    "INSERT INTO tenants (id, name, created_at) VALUES ('ten_1', 'acme', 0)",
    "INSERT INTO schedules (id, tenant_id, name, cron, timezone, target_url, payload_kind,"
    " body, content_type, headers, jitter_seconds, catchup_policy, catchup_window_seconds,"
    " max_attempts, timeout_seconds, created_at, updated_at) VALUES ('sch_1', 'ten_1', 'n',"
    " '* * * * *', 'UTC', 'https://x.example/', 'json', ?, 'application/json', '[]',"
    " 0, 'all', 60, 5, 30, 0, 0)",
    "INSERT INTO bodies (digest, content_type, body) VALUES ('d', 'application/json', ?)",
    "INSERT INTO job_runs (id, tenant_id, schedule_id, schedule_version, scheduled_for,"
    " idempotency_key, due_at, state, body_digest, created_at, updated_at)"
    " VALUES ('run_1', 'ten_1', 'sch_1', 1, 0, 'k', 0, 'failed', 'd', 0, 0)",
]
# (attempt, started_at, finished_at, outcome)
_ATTEMPTS = [(1, 10, 100, "abandoned"), (2, 200, 900, "stale"), (3, 300, 950, "stale")]
_ATTEMPTS += [(4, 400, 960, "ok"), (5, 500, 970, "stale"), (6, 600, 980, "stale")]
# (occurred_at, type, attempt as JSON text)
_EVENTS = [
    (150, "schedule.run.retrying", "2"),  # before attempt 2 started: not its reclaim
    (240, "schedule.run.failed", "2"),  # the first after it started: its reclaim
    (250, "schedule.run.retrying", "2"),
    (230, "schedule.paused", "2"),  # not a run event
    (310, "schedule.run.retrying", '"3"'),  # SQLite's numeric affinity: "3" is 3
    (305, "schedule.run.retrying", '"3x"'),  # but "3x" is not
    (550, "schedule.run.cancelled", "5.0"),  # 5.0 is the number 5, in both
    (650, "schedule.run.failed", '"six"'),  # not a number at all
]


def test_0019_backfills_reclaimed_at_as_sqlite_does(pg: Any, lite: apsw.Connection) -> None:
    last = len(PG_FILES)
    for _, sql in PG_FILES[: last - 1]:
        pg_apply(pg, sql)
    sqlite_at(lite, last - 1)
    statements = [(sql, (b"{}",) if "?" in sql else ()) for sql in _SEED]
    statements += [
        (
            "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id, started_at,"
            " finished_at, outcome) VALUES ('run_1', ?, 't', 'inc_1', ?, ?, ?)",
            attempt,
        )
        for attempt in _ATTEMPTS
    ]
    statements += [
        (
            "INSERT INTO events (id, tenant_id, type, schedule_id, run_id, occurred_at, data)"
            " VALUES (?, 'ten_1', ?, 'sch_1', 'run_1', ?, ?)",
            (f"evt_{n}", kind, at, '{"attempt": ' + attempt + "}"),
        )
        for n, (at, kind, attempt) in enumerate(_EVENTS)
    ]
    for sql, args in statements:
        assert _both(pg, lite, sql, *args) == [[], []]
    pg_apply(pg, PG_FILES[-1][1])
    sqlite_at(lite, last)
    pg_rows, lite_rows = _both(
        pg, lite, "SELECT attempt, reclaimed_at FROM attempts ORDER BY attempt"
    )
    assert (
        pg_rows
        == lite_rows
        == [
            (1, 100),
            (2, 240),
            (3, 310),
            (4, None),
            (5, 550),
            (6, None),
        ]
    )


# The store's upserts name these conflict targets (store/materialise.py, store/backfill.py,
# store/notifications.py, store/request_keys.py, bodies' INSERT OR IGNORE): PostgreSQL wants
# a unique index on exactly those columns, and refuses the statement when planning it.
CONFLICT_TARGETS = [
    ("job_runs", ("schedule_id", "scheduled_for")),
    ("bodies", ("digest",)),
    ("notification_targets", ("tenant_id",)),
    ("notifications", ("event_seq", "url")),
    ("request_keys", ("tenant_id", "key")),
]


def _explain_upsert(pg: Any, table: str, columns: tuple[str, ...]) -> None:
    names = ", ".join(columns)
    values = ", ".join(["NULL"] * len(columns))
    pg.execute(
        f"EXPLAIN INSERT INTO {table} ({names}) VALUES ({values}) ON CONFLICT ({names}) DO NOTHING"
    )


def test_the_store_s_conflict_targets_have_their_unique_index(pg: Any) -> None:
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    for table, columns in CONFLICT_TARGETS:
        _explain_upsert(pg, table, columns)
    with pytest.raises(psycopg.errors.InvalidColumnReference):  # what a missing one does
        _explain_upsert(pg, "bodies", ("content_type",))
