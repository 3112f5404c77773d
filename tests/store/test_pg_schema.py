"""The PostgreSQL migrations (appliance/store/infra/postgres/migrations) give, after every
version, the schema the SQLite migrations (appliance/store/infra/migrations) give: the same
tables; the same columns in the same order, with matching types, nullability and
defaults; the same primary keys, foreign keys, UNIQUE constraints and number of CHECK
constraints; the same index names, each unique or not, partial or not, over the same
columns. A missing or drifting migration fails here.

Each PostgreSQL file is applied with raw psycopg in one transaction, as the runner does;
the SQLite side is migrated by appliance.store.infra.migrate (apsw). The PG-only `rowid`
columns (0001's header says why) are checked by their own rules, not compared.
"""

from __future__ import annotations

from typing import Any

import apsw

from appliance.store.infra.migrate import migrate, migrations
from tests.store.schema_shapes import (
    PG_COLUMNS,
    PG_FILES,
    ROWID_TABLES,
    SQLITE_FILES,
    assert_same,
    pg_apply,
    pg_schema,
    sqlite_at,
    sqlite_schema,
)


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
    for table, name, type_, _, _, identity, collation in pg.execute(PG_COLUMNS):
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
