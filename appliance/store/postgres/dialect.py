"""The store's SQL, written in SQLite's dialect, said in PostgreSQL's — once per statement.

Store functions are written once (:mod:`appliance.store.connection`); the few places where
the two dialects differ are rewritten here, by a scanner that knows string literals and
parentheses, never by the callers (docs/adr/0044-postgresql-store.md):

- ``?`` and ``:name`` → ``%s`` and ``%(name)s`` (a literal ``%`` becomes ``%%``);
  ``?NNN`` is refused (:class:`DialectError`).
- ``max(a, b)``, ``min(a, b)`` → ``greatest(a, b)``, ``least(a, b)`` (the scalar forms
  only: one argument is the aggregate, the same in both).
- ``instr(h, n)`` → ``strpos(h, n)``.
- ``json_each(x)`` → ``json_array_elements_text(CAST(x AS json))`` (its column is
  ``value`` in both).
- ``lower(hex(randomblob(16)))`` → 32 random hex digits from ``gen_random_uuid()``.
- ``CAST(x AS INTEGER)`` → ``CAST(x AS BIGINT)`` (instants are epoch milliseconds).
- ``t INDEXED BY i`` → ``t`` (PostgreSQL's planner picks its own index).
- ``temp.t`` → ``pg_temp.t``; ``WITHOUT ROWID`` → nothing.
- ``/* FOR UPDATE SKIP LOCKED */`` → the clause itself (a claim's pick: SQLite reads a
  comment, and its single writer has nothing to skip).
- ``PRAGMA user_version`` and the size pragmas → the same figure read from PostgreSQL
  (:data:`PRAGMAS`); any other pragma is refused.

Anything else must already mean the same in both (``ON CONFLICT``, ``RETURNING``,
window functions, ``WITH RECURSIVE``); the contract suite runs every store test on both.
"""

from __future__ import annotations

import functools
import re

_RANDOM_TOKEN = "lower(hex(randomblob(16)))"
_SKIP_LOCKED = "/* FOR UPDATE SKIP LOCKED */"
_PG_RANDOM_TOKEN = "replace(CAST(gen_random_uuid() AS text), '-', '')"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RENAMED = {"instr": "strpos"}
_SCALAR_WHEN_MANY = {"max": "greatest", "min": "least"}
_CAST_INTEGER = re.compile(r"\bAS\s+INTEGER\b", re.IGNORECASE)
_TEMP_SCHEMA = re.compile(r"\btemp\.", re.IGNORECASE)
_WITHOUT_ROWID = re.compile(r"\s+WITHOUT\s+ROWID\b", re.IGNORECASE)
_INDEX_HINT = re.compile(r"\s+(?:INDEXED\s+BY\s+[A-Za-z_][A-Za-z0-9_]*|NOT\s+INDEXED)\b")


class DialectError(ValueError):
    """A statement this translator cannot say in PostgreSQL (a store bug, not bad input)."""


# The figures SQLite keeps as pragmas, read from PostgreSQL (``store/stats.py``).
PRAGMAS = {
    "PRAGMA user_version": "SELECT version FROM steeple_schema",
    "PRAGMA page_size": "SELECT CAST(current_setting('block_size') AS BIGINT)",
    "PRAGMA page_count": "SELECT pg_database_size(current_database())"
    " / CAST(current_setting('block_size') AS BIGINT)",
    "PRAGMA freelist_count": "SELECT 0",
    "PRAGMA journal_mode": "SELECT 'postgresql'",
}


@functools.lru_cache(maxsize=4096)
def to_postgres(sql: str) -> str:
    """``sql`` in PostgreSQL's dialect (cached: the store's statements are few)."""
    if sql.startswith("PRAGMA"):
        if sql not in PRAGMAS:
            raise DialectError(f"no PostgreSQL reading for {sql!r}")
        return PRAGMAS[sql]
    sql = sql.replace(_RANDOM_TOKEN, _PG_RANDOM_TOKEN).replace(
        _SKIP_LOCKED, "FOR UPDATE SKIP LOCKED"
    )
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            end = _end_of_quoted(sql, i)
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif c == "?":
            if i + 1 < n and sql[i + 1].isdigit():
                raise DialectError(f"numbered ?N parameters have no PostgreSQL form: {sql}")
            out.append("%s")
            i += 1
        elif c == "%":
            out.append("%%")
            i += 1
        elif c == ":" and i + 1 < n and sql[i + 1] == ":":
            out.append("::")
            i += 2
        elif c == ":" and (m := _WORD.match(sql, i + 1)):
            out.append(f"%({m.group()})s")
            i = m.end()
        elif (m := _WORD.match(sql, i)) and (i == 0 or not _is_word_char(sql[i - 1])):
            word = m.group()
            i = m.end()
            out.append(_function_name(sql, i, word))
        else:
            out.append(c)
            i += 1
    said = _INDEX_HINT.sub("", _CAST_INTEGER.sub("AS BIGINT", "".join(out)))
    said = _TEMP_SCHEMA.sub("pg_temp.", _WITHOUT_ROWID.sub("", said))
    return _rewrite_json_each(said)


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _end_of_quoted(sql: str, start: int) -> int:
    quote = sql[start]
    i = start + 1
    while True:
        j = sql.find(quote, i)
        if j < 0:
            raise DialectError(f"unterminated {quote} in: {sql}")
        if j + 1 < len(sql) and sql[j + 1] == quote:  # a doubled quote stays inside
            i = j + 2
            continue
        return j + 1


def _function_name(sql: str, after: int, word: str) -> str:
    """``word`` as PostgreSQL names it, when it is a call (``word(``)."""
    if after >= len(sql) or sql[after] != "(":
        return word
    lowered = word.lower()
    if lowered in _RENAMED:
        return _RENAMED[lowered]
    if lowered in _SCALAR_WHEN_MANY and _arguments(sql, after) > 1:
        return _SCALAR_WHEN_MANY[lowered]
    return word


def _arguments(sql: str, open_paren: int) -> int:
    """How many top-level arguments the call whose ``(`` is at ``open_paren`` has."""
    depth, count, i = 0, 1, open_paren
    while i < len(sql):
        c = sql[i]
        if c in "'\"":
            i = _end_of_quoted(sql, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return count
        elif c == "," and depth == 1:
            count += 1
        i += 1
    raise DialectError(f"unbalanced parentheses in: {sql}")


_JSON_EACH = re.compile(r"\bjson_each\(", re.IGNORECASE)


def _rewrite_json_each(sql: str) -> str:
    """``json_each(x)`` → ``json_array_elements_text(CAST(x AS json))`` (its ``value``
    column keeps its name)."""
    while m := _JSON_EACH.search(sql):
        start = m.end()
        depth, i = 1, start
        while depth:
            if i >= len(sql):
                raise DialectError(f"unbalanced json_each( in: {sql}")
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            i += 1
        inner = sql[start : i - 1]
        sql = f"{sql[: m.start()]}json_array_elements_text(CAST({inner} AS json)){sql[i:]}"
    return sql
