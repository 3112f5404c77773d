"""The PostgreSQL store's placeholder translator (store/infra/postgres/dialect.py): it
converts placeholders only, and refuses the SQLite-only forms that the store writes as
explicit ``Sql`` pairs (store/infra/connection.py).

Pure string tests; whether a pair's two sides *mean* the same is the contract suite's
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
        ("SELECT CAST(:x AS json)::text", "SELECT CAST(%(x)s AS json)::text"),
        # The aggregates mean the same in both: passed as they are.
        ("SELECT max(a), min(b), count(*) FROM t", "SELECT max(a), min(b), count(*) FROM t"),
        # A pair's PostgreSQL side: its functions pass, only its placeholders change.
        (
            "SELECT greatest(a, ?), least(b, 1), strpos(lower(n), ?) FROM t",
            "SELECT greatest(a, %s), least(b, 1), strpos(lower(n), %s) FROM t",
        ),
        (
            "SELECT value FROM json_array_elements_text(CAST(:ids AS json))",
            "SELECT value FROM json_array_elements_text(CAST(%(ids)s AS json))",
        ),
        (
            "SET t = replace(CAST(gen_random_uuid() AS text), '-', '')",
            "SET t = replace(CAST(gen_random_uuid() AS text), '-', '')",
        ),
        ("DELETE FROM pg_temp.p", "DELETE FROM pg_temp.p"),
        # What SQLite alone says is found in code only, never inside a literal or quoted name.
        (
            "SELECT 'temp.x', 'AS INTEGER', 'json_each(a)', \"max(a, b)\", 'PRAGMA' FROM t",
            "SELECT 'temp.x', 'AS INTEGER', 'json_each(a)', \"max(a, b)\", 'PRAGMA' FROM t",
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
    ],
)
def test_only_placeholders_change(sqlite: str, postgres: str) -> None:
    assert to_postgres(sqlite) == postgres


# Each form the translator once rewrote, now written as an Sql pair by the store: refused,
# naming the construct and the pair.
@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SET lease_token = lower(hex(randomblob(16)))", "hex()"),
        ("SELECT randomblob(16)", "randomblob()"),
        ("SET t = LOWER(HEX(RANDOMBLOB(16)))", "HEX()"),
        ("SELECT instr(lower(name), ?) > 0", "instr()"),
        ("SELECT value FROM json_each(:ids)", "json_each()"),
        ("SELECT max(a, b) FROM t", "scalar max(a, b)"),
        ("SELECT MIN(coalesce(a, :u), :u) FROM t", "scalar MIN(a, b)"),
        ("SELECT min(max(due_at, coalesce(leased_until, 0))) FROM t", "scalar max(a, b)"),
        ("SELECT CAST(x AS INTEGER)", "CAST(... AS INTEGER)"),
        ("SELECT 1 FROM job_runs r INDEXED BY job_runs_x WHERE a", "INDEXED BY"),
        ("SELECT 1 FROM job_runs NOT INDEXED WHERE a", "INDEXED BY"),
        ("DELETE FROM temp.p", "the temp. schema"),
        ("CREATE TEMP TABLE IF NOT EXISTS p (id TEXT PRIMARY KEY) WITHOUT ROWID", "WITHOUT ROWID"),
        ("PRAGMA user_version", "PRAGMA"),
        ("PRAGMA page_size", "PRAGMA"),
        ("pragma journal_mode", "PRAGMA"),
        ("PRAGMA wal_checkpoint", "PRAGMA"),
    ],
)
def test_a_sqlite_only_form_is_refused_and_pointed_at_a_pair(sql: str, construct: str) -> None:
    with pytest.raises(DialectError) as refused:
        to_postgres(sql)
    assert construct in str(refused.value)
    assert "Sql(sqlite=..., postgres=...)" in str(refused.value)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE t SET a = ?3 WHERE id = ?1",
        "SELECT 'open",
        "SELECT max(a, b",
        "SELECT (a))",
        # comments: a form inside one would be passed or refused unseen
        "SELECT a -- and ?\nFROM t",
        "SELECT a /* :name */ FROM t",
        "SELECT a FROM t LIMIT 3 /* FOR UPDATE SKIP LOCKED */",
        # functions not known to mean the same in both
        "SELECT strftime('%s', 'now')",
        "SELECT group_concat(a) FROM t",
        "SELECT json_extract(a, '$.b') FROM t",
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
