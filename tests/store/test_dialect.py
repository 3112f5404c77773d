"""The translator from the store's SQLite dialect to PostgreSQL's (store/infra/postgres/dialect.py).

Pure string tests; whether the translations *mean* the same is the contract suite's
question (every store test runs on both stores)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.store.infra.postgres.dialect import DialectError, to_postgres


@pytest.mark.parametrize(
    ("sqlite", "postgres"),
    [
        ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = %s AND c = %s"),
        ("UPDATE t SET a = :now WHERE id = :id", "UPDATE t SET a = %(now)s WHERE id = %(id)s"),
        (
            "SELECT '?', ':x', 'a%b' FROM t WHERE a = ?",
            "SELECT '?', ':x', 'a%%b' FROM t WHERE a = %s",
        ),
        ("SELECT 'it''s ?' WHERE a = ?", "SELECT 'it''s ?' WHERE a = %s"),
        (
            "SELECT max(a, b), max(a), min(x, 1), min(y) FROM t",
            "SELECT greatest(a, b), max(a), least(x, 1), min(y) FROM t",
        ),
        (
            "SELECT max(coalesce(a, 0), (SELECT max(b) FROM u))",
            "SELECT greatest(coalesce(a, 0), (SELECT max(b) FROM u))",
        ),
        ("SELECT instr(lower(name), ?) > 0", "SELECT strpos(lower(name), %s) > 0"),
        (
            "SELECT value FROM json_each(:ids)",
            "SELECT value FROM json_array_elements_text(CAST(%(ids)s AS json))",
        ),
        ("SELECT CAST(x AS INTEGER)", "SELECT CAST(x AS BIGINT)"),
        (
            "SELECT 1 FROM job_runs r INDEXED BY job_runs_x WHERE a",
            "SELECT 1 FROM job_runs r WHERE a",
        ),
        (
            "CREATE TEMP TABLE IF NOT EXISTS p (id TEXT PRIMARY KEY) WITHOUT ROWID",
            "CREATE TEMP TABLE IF NOT EXISTS p (id TEXT PRIMARY KEY)",
        ),
        ("DELETE FROM temp.p", "DELETE FROM pg_temp.p"),
        (
            "SET lease_token = lower(hex(randomblob(16)))",
            "SET lease_token = replace(CAST(gen_random_uuid() AS text), '-', '')",
        ),
        (
            "SET t = LOWER(HEX(RANDOMBLOB(16)))",
            "SET t = replace(CAST(gen_random_uuid() AS text), '-', '')",
        ),
        # What differs is rewritten in code only, never inside a literal or a quoted name.
        (
            "SELECT 'temp.x', 'AS INTEGER', 'json_each(a)', \"max(a, b)\" FROM temp.t",
            "SELECT 'temp.x', 'AS INTEGER', 'json_each(a)', \"max(a, b)\" FROM pg_temp.t",
        ),
        (
            "SELECT value FROM json_each(coalesce(:ids, ')'))",
            "SELECT value FROM json_array_elements_text(CAST(coalesce(%(ids)s, ')') AS json))",
        ),
        # Names being made or filled, and a common table expression's, are not calls.
        (
            "WITH RECURSIVE w(id) AS (SELECT 1), room(a) AS (SELECT 2) INSERT INTO t(a) VALUES(1)",
            "WITH RECURSIVE w(id) AS (SELECT 1), room(a) AS (SELECT 2) INSERT INTO t(a) VALUES(1)",
        ),
        (
            "SELECT id FROM t ORDER BY id LIMIT 3 FOR UPDATE SKIP LOCKED",
            "SELECT id FROM t ORDER BY id LIMIT 3 FOR UPDATE SKIP LOCKED",
        ),
        ("PRAGMA user_version", "SELECT version FROM steeple_schema"),
    ],
)
def test_each_rule(sqlite: str, postgres: str) -> None:
    assert to_postgres(sqlite) == postgres


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE t SET a = ?3 WHERE id = ?1",
        "PRAGMA wal_checkpoint",
        "SELECT 'open",
        "SELECT max(a, b",
        "SELECT (a))",
        # comments: a rule inside one would be rewritten or missed unseen
        "SELECT a -- and ?\nFROM t",
        "SELECT a /* :name */ FROM t",
        "SELECT a FROM t LIMIT 3 /* FOR UPDATE SKIP LOCKED */",
        # functions not known to mean the same in both
        "SELECT hex(a) FROM t",
        "SELECT lower(hex(randomblob(8)))",
        "SELECT strftime('%s', 'now')",
        "SELECT group_concat(a) FROM t",
    ],
)
def test_what_has_no_postgresql_form_is_refused(sql: str) -> None:
    with pytest.raises(DialectError):
        to_postgres(sql)


_PLAIN = st.text(alphabet="abcxyz_ =<>(),.*0123456789\n", max_size=40)


@given(
    st.lists(
        st.one_of(
            _PLAIN,
            st.just("?"),
            st.text(alphabet="ab?:%", max_size=8).map(
                lambda inner: "'" + inner.replace("'", "''") + "'"
            ),
        ),
        max_size=12,
    )
)
def test_placeholders_outside_literals_become_pyformat_and_literals_keep_their_text(
    parts: list[str],
) -> None:
    """Every ``?`` outside a literal is one ``%s``; a literal's text survives, its ``%``
    doubled (psycopg reads ``%%`` as ``%``)."""
    sql = " ".join(parts)
    try:
        said = to_postgres(sql)
    except DialectError:  # an unbalanced "(" made by the alphabet: refused, not mangled
        return
    outside = [p for p in parts if not p.startswith("'")]
    assert said.count("%s") == sum(p.count("?") for p in outside)
    for literal in (p for p in parts if p.startswith("'")):
        assert literal.replace("%", "%%") in said
