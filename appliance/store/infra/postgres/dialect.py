"""The store's SQL, written in SQLite's dialect, said in PostgreSQL's — once per statement.

Store functions are written once (:mod:`appliance.store.infra.connection`); the few places where
the two dialects differ are rewritten here, by a scanner that knows string literals and
parentheses, never by the callers (docs/adr/0044-postgresql-store.md). Rules, applied
outside string literals and quoted names only (a literal's text is never rewritten):

- ``?`` and ``:name`` → ``%s`` and ``%(name)s`` (a literal ``%`` becomes ``%%``);
  ``?NNN`` is refused.
- ``max(a, b)``, ``min(a, b)`` → ``greatest(a, b)``, ``least(a, b)`` (the scalar forms
  only: one argument is the aggregate, the same in both).
- ``instr(h, n)`` → ``strpos(h, n)``.
- ``json_each(x)`` → ``json_array_elements_text(CAST(x AS json))`` (its column is
  ``value`` in both).
- ``lower(hex(randomblob(16)))``, in any case → 32 random hex digits from
  ``gen_random_uuid()``.
- ``CAST(x AS INTEGER)`` → ``CAST(x AS BIGINT)`` (instants are epoch milliseconds).
- ``t INDEXED BY i`` → ``t`` (PostgreSQL's planner picks its own index).
- ``temp.t`` → ``pg_temp.t``; ``WITHOUT ROWID`` → nothing.
- ``PRAGMA user_version`` and the size pragmas → the same figure read from PostgreSQL
  (:data:`PRAGMAS`); any other pragma is refused.

What the scanner does not understand it refuses (:class:`DialectError`) rather than pass
through: comments, a call of a function outside :data:`FUNCTIONS`, unbalanced quotes or
parentheses. Anything else must already mean the same in both (``ON CONFLICT``,
``RETURNING``, window functions, ``WITH RECURSIVE``, ``FOR UPDATE SKIP LOCKED``, which a
store function adds only for PostgreSQL: :func:`appliance.store.infra.connection.row_locks`);
the contract suite runs every store test on both.
"""

from __future__ import annotations

import functools
import re
from typing import Final

_RANDOM_TOKEN = re.compile(r"lower\(\s*hex\(\s*randomblob\(\s*16\s*\)\s*\)\s*\)", re.IGNORECASE)
_PG_RANDOM_TOKEN = "replace(CAST(gen_random_uuid() AS text), '-', '')"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RENAMED = {"instr": "strpos"}
_SCALAR_WHEN_MANY = {"max": "greatest", "min": "least"}
_CAST_INTEGER = re.compile(r"\bAS\s+INTEGER\b", re.IGNORECASE)
_TEMP_SCHEMA = re.compile(r"\btemp\.", re.IGNORECASE)
_WITHOUT_ROWID = re.compile(r"\s+WITHOUT\s+ROWID\b", re.IGNORECASE)
_INDEX_HINT = re.compile(r"\s+(?:INDEXED\s+BY\s+[A-Za-z_][A-Za-z0-9_]*|NOT\s+INDEXED)\b")
_NAMED_BODY = re.compile(r"\s*AS\s*(?:\(|MATERIALIZED\b|NOT\b)", re.IGNORECASE)

# The functions that mean the same in both dialects (or are renamed above). A call of any
# other function is refused: it may be SQLite's alone, and would fail on PostgreSQL only.
FUNCTIONS: Final = frozenset(
    {"abs", "coalesce", "count", "json_each", "instr", "length", "lower", "upper"}
    | {"max", "min", "nullif", "row_number", "sum", "avg", "round", "substr"}
)
# Words that take a parenthesis without being a call (``IN (…)``, ``PRIMARY KEY(…)``).
_KEYWORDS: Final = frozenset(
    {"all", "and", "any", "as", "by", "cast", "check", "conflict", "else", "exists", "filter"}
    | {"from", "in", "is", "join", "key", "not", "on", "or", "over", "returning", "select"}
    | {"set", "then", "union", "unique", "using", "values", "when", "where"}
)
# After these, ``name(`` names a table, a function or a trigger being made or filled.
_NAMING: Final = frozenset({"into", "table", "recursive", "function", "trigger", "references"})


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
    return _Scan(sql).said()


class _Scan:
    """One pass over a statement: literals copied, code rewritten (see the module doc)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.out: list[str] = []  # finished pieces: rewritten code and literals
        self.code: list[str] = []  # the code since the last literal
        self.closers: list[str] = []  # per open parenthesis, what precedes its ")"
        self.previous = ""  # the last word, lower case

    def said(self) -> str:
        sql, i, n = self.sql, 0, len(self.sql)
        while i < n:
            i = self._step(i)
        if self.closers:
            raise DialectError(f"unbalanced parentheses in: {sql}")
        self._flush()
        return "".join(self.out)

    def _step(self, i: int) -> int:
        sql, c = self.sql, self.sql[i]
        if sql.startswith(("--", "/*"), i):
            raise DialectError(f"comments are not translated (write them in Python): {sql}")
        if c in "'\"":
            end = _end_of_quoted(sql, i)
            self._flush()
            self.out.append(sql[i:end].replace("%", "%%"))
            return end
        if c == "?":
            if sql[i + 1 : i + 2].isdigit():
                raise DialectError(f"numbered ?N parameters have no PostgreSQL form: {sql}")
            self.code.append("%s")
            return i + 1
        if c == "%":
            self.code.append("%%")
            return i + 1
        if sql.startswith("::", i):
            self.code.append("::")
            return i + 2
        if c == ":" and (m := _WORD.match(sql, i + 1)):
            self.code.append(f"%({m.group()})s")
            return m.end()
        if c == "(":
            self.closers.append("")
        elif c == ")":
            if not self.closers:
                raise DialectError(f"unbalanced parentheses in: {sql}")
            self.code.append(self.closers.pop())
        elif (m := _WORD.match(sql, i)) and (i == 0 or not _is_word_char(sql[i - 1])):
            return self._word(i, m.group(), m.end())
        self.code.append(c)
        return i + 1

    def _word(self, start: int, word: str, end: int) -> int:
        sql = self.sql
        if random := _RANDOM_TOKEN.match(sql, start):
            self.code.append(_PG_RANDOM_TOKEN)
            return random.end()
        lowered = word.lower()
        if end < len(sql) and sql[end] == "(":
            word = self._call(word, lowered, end)
            if word.startswith("json_array_elements_text"):
                self.code.append(word)
                self.closers.append(" AS json)")
                self.previous = lowered
                return end + 1
        self.code.append(word)
        self.previous = lowered
        return end

    def _call(self, word: str, lowered: str, open_paren: int) -> str:
        """``word(`` as PostgreSQL says it; refused when it is an unknown function."""
        if lowered in _RENAMED:
            return _RENAMED[lowered]
        if lowered == "json_each":
            return "json_array_elements_text(CAST("
        if lowered in _SCALAR_WHEN_MANY and _arguments(self.sql, open_paren) > 1:
            return _SCALAR_WHEN_MANY[lowered]
        if lowered in FUNCTIONS or lowered in _KEYWORDS or self.previous in _NAMING:
            return word
        if _NAMED_BODY.match(self.sql, _after_parentheses(self.sql, open_paren)):
            return word  # a common table expression's name and columns: name(a, b) AS (…)
        raise DialectError(f"{word}() is not known to mean the same in PostgreSQL: {self.sql}")

    def _flush(self) -> None:
        code = "".join(self.code)
        self.code.clear()
        code = _INDEX_HINT.sub("", _CAST_INTEGER.sub("AS BIGINT", code))
        self.out.append(_TEMP_SCHEMA.sub("pg_temp.", _WITHOUT_ROWID.sub("", code)))


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


def _arguments(sql: str, open_paren: int) -> int:
    """How many top-level arguments the call whose ``(`` is at ``open_paren`` has."""
    return _parenthesised(sql, open_paren)[0]


def _after_parentheses(sql: str, open_paren: int) -> int:
    """The index just after the ``)`` that closes the ``(`` at ``open_paren``."""
    return _parenthesised(sql, open_paren)[1]


def _parenthesised(sql: str, open_paren: int) -> tuple[int, int]:
    """For the ``(`` at ``open_paren``: its top-level comma-separated parts, and the index
    just after its ``)``."""
    count = 1
    depth, i = 0, open_paren
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
                return count, i + 1
        elif c == "," and depth == 1:
            count += 1
        i += 1
    raise DialectError(f"unbalanced parentheses in: {sql}")
