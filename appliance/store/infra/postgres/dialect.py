"""The store's SQL, with PostgreSQL's placeholders — and nothing else changed.

Store functions are written once (:mod:`appliance.store.infra.connection`), with ``?`` and
``:name`` parameters; where the two dialects differ, the statement is an explicit
:class:`~appliance.store.infra.connection.Sql` pair at its call site, so what each store
runs is readable there (docs/adr/0044-postgresql-store.md, its 2026-12 update). This
module only converts placeholders, outside string literals and quoted names (a literal's
text is never changed):

- ``?`` and ``:name`` → ``%s`` and ``%(name)s`` (a literal ``%`` becomes ``%%``);
  ``?NNN`` is refused.

Everything else passes unchanged, or is refused (:class:`DialectError`): a statement that
reaches PostgreSQL with a SQLite-only form is a store bug, named here rather than failed
on (or, worse, run with another meaning) by the server. Refused:

- the forms a pair now says for each store (:data:`SQLITE_ONLY` and
  :data:`SQLITE_ONLY_FUNCTIONS`): ``randomblob``, ``hex``, ``instr``, ``json_each``, the
  scalar ``max(a, b)``/``min(a, b)`` (the one-argument aggregates mean the same in both),
  ``CAST(x AS INTEGER)``, ``INDEXED BY``, ``temp.``, ``WITHOUT ROWID``, any ``PRAGMA``;
- comments, unbalanced quotes or parentheses, and a call of a function outside
  :data:`FUNCTIONS`.

What passes must already mean the same in both (``ON CONFLICT``, ``RETURNING``, window
functions, ``WITH RECURSIVE``, ``FOR UPDATE SKIP LOCKED``, which a claim adds only for
PostgreSQL: :func:`appliance.store.infra.connection.row_locks`); the contract suite runs
every store test on both.
"""

from __future__ import annotations

import functools
import re
from typing import Final

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMED_BODY = re.compile(r"\s*AS\s*(?:\(|MATERIALIZED\b|NOT\b)", re.IGNORECASE)
_PAIR = "write it as an Sql(sqlite=..., postgres=...) pair (appliance.store.infra.connection)"

# The functions that mean the same in both dialects, and the PostgreSQL-only ones a
# pair's PostgreSQL side calls (a SQLite side calling one fails on SQLite, in the suite).
# A call of any other function is refused: it may be SQLite's alone.
FUNCTIONS: Final = frozenset(
    {"abs", "coalesce", "count", "length", "lower", "upper", "max", "min", "nullif"}
    | {"row_number", "sum", "avg", "round", "substr", "replace"}
    | {"greatest", "least", "strpos", "json_array_elements_text", "gen_random_uuid"}
    | {"unnest"}
    | {"current_setting", "current_database", "pg_database_size", "to_regclass"}
)
# SQLite's functions that PostgreSQL lacks or means otherwise, each said by a pair.
SQLITE_ONLY_FUNCTIONS: Final = frozenset({"randomblob", "hex", "instr", "json_each"})
# The scalar forms (two or more arguments) of these are SQLite's; PostgreSQL says
# greatest/least. With one argument they are the aggregate, the same in both.
_SCALAR_WHEN_MANY: Final = frozenset({"max", "min"})
# SQLite-only forms outside any call, found in code (never in literals).
SQLITE_ONLY: Final = (
    (re.compile(r"\bPRAGMA\b", re.IGNORECASE), "PRAGMA"),
    (re.compile(r"\bAS\s+INTEGER\b", re.IGNORECASE), "CAST(... AS INTEGER)"),
    (re.compile(r"\b(?:INDEXED\s+BY|NOT\s+INDEXED)\b", re.IGNORECASE), "INDEXED BY"),
    (re.compile(r"\btemp\.", re.IGNORECASE), "the temp. schema"),
    (re.compile(r"\bWITHOUT\s+ROWID\b", re.IGNORECASE), "WITHOUT ROWID"),
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


@functools.lru_cache(maxsize=4096)
def to_postgres(sql: str) -> str:
    """``sql`` with PostgreSQL's placeholders (cached: the store's statements are few)."""
    return _Scan(sql).said()


class _Scan:
    """One pass over a statement: literals copied, placeholders converted, code checked
    (see the module doc)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.out: list[str] = []  # finished pieces: code and literals
        self.code: list[str] = []  # the code since the last literal
        self.depth = 0  # open parentheses
        self.previous = ""  # the last word, lower case

    def said(self) -> str:
        sql, i, n = self.sql, 0, len(self.sql)
        while i < n:
            i = self._step(i)
        if self.depth:
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
            self.depth += 1
        elif c == ")":
            if not self.depth:
                raise DialectError(f"unbalanced parentheses in: {sql}")
            self.depth -= 1
        elif (m := _WORD.match(sql, i)) and (i == 0 or not _is_word_char(sql[i - 1])):
            return self._word(i, m.group(), m.end())
        self.code.append(c)
        return i + 1

    def _word(self, start: int, word: str, end: int) -> int:
        lowered = word.lower()
        if end < len(self.sql) and self.sql[end] == "(":
            self._check_call(word, lowered, end)
        self.code.append(word)
        self.previous = lowered
        return end

    def _check_call(self, word: str, lowered: str, open_paren: int) -> None:
        """Refuse ``word(`` unless it means the same in PostgreSQL (or is no call)."""
        sql = self.sql
        if lowered in SQLITE_ONLY_FUNCTIONS:
            raise DialectError(f"{word}() is SQLite's alone: {_PAIR}: {sql}")
        if lowered in _SCALAR_WHEN_MANY and _arguments(sql, open_paren) > 1:
            raise DialectError(
                f"the scalar {word}(a, b) is SQLite's (PostgreSQL says"
                f" {'greatest' if lowered == 'max' else 'least'}): {_PAIR}: {sql}"
            )
        if lowered in FUNCTIONS or lowered in _KEYWORDS or self.previous in _NAMING:
            return
        if _NAMED_BODY.match(sql, _after_parentheses(sql, open_paren)):
            return  # a common table expression's name and columns: name(a, b) AS (…)
        raise DialectError(f"{word}() is not known to mean the same in PostgreSQL: {sql}")

    def _flush(self) -> None:
        code = "".join(self.code)
        self.code.clear()
        for pattern, construct in SQLITE_ONLY:
            if pattern.search(code):
                raise DialectError(f"{construct} is SQLite's alone: {_PAIR}: {self.sql}")
        self.out.append(code)


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
