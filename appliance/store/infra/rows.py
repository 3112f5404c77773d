"""Rows to records by column name: the one way the store reads a row into a value.

A :class:`Columns` names, for one record type, the column (or SQL expression) each field
is read from and the converter that turns the SQLite value into the field's type. It
writes the ``SELECT`` list itself — every column aliased to its field's name — and builds
the record by keyword from those names, so a query and the record it fills cannot drift
apart by position, and no caller indexes a row (``row[16]``) or slices one (``row[:10]``).

Converters are strict: a column holding a value of the wrong type raises ``TypeError``
naming the field (the schema is ``STRICT``, so that is a bug, not bad input).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

R = TypeVar("R")
E = TypeVar("E", bound=enum.Enum)
Value = int | float | str | bytes | None  # what SQLite stores (apsw.SQLiteValue)
Convert = Callable[[Value], object]


class Columns(Generic[R]):
    """How rows become ``record`` values: ``fields`` in order, each read from the SQL
    expression ``sql[field]`` (default: the column of the same name, of ``table`` when
    given) through ``convert[field]`` (default: as stored)."""

    def __init__(
        self,
        record: Callable[..., R],
        fields: Sequence[str],
        *,
        table: str | None = None,
        sql: Mapping[str, str] | None = None,
        convert: Mapping[str, Convert] | None = None,
    ) -> None:
        sql, convert = sql or {}, convert or {}
        unknown = (set(sql) | set(convert)) - set(fields)
        if unknown:
            raise ValueError(f"no such fields: {', '.join(sorted(unknown))}")
        self._record = record
        self.fields = tuple(fields)
        expressions = {name: sql.get(name, f"{table}.{name}" if table else name) for name in fields}
        self.select = ", ".join(
            name if expression == name else f"{expression} AS {name}"
            for name, expression in expressions.items()
        )
        self._converting = tuple(
            (index, convert[name]) for index, name in enumerate(self.fields) if name in convert
        )
        # A named tuple whose fields are these, in this order, is built positionally: the
        # SELECT list was written from the same names, so position is name (and faster:
        # the planner reads one per due schedule per pass).
        self._positional = getattr(record, "_fields", None) == self.fields

    def one(self, row: Sequence[Value]) -> R:
        """The record of one row read with :attr:`select`."""
        if len(row) != len(self.fields):
            raise TypeError(
                f"expected the {len(self.fields)} columns {self.select}, got {len(row)}"
            )
        values: list[object] = list(row)
        index = 0
        try:
            for index, convert in self._converting:
                values[index] = convert(row[index])
        except TypeError as exc:
            raise TypeError(f"column {self.fields[index]}: {exc}") from None
        if self._positional:
            return self._record(*values)
        return self._record(**dict(zip(self.fields, values, strict=True)))

    def all(self, rows: Iterable[Sequence[Value]]) -> list[R]:
        return [self.one(row) for row in rows]


def integer(value: Value) -> int:
    if not isinstance(value, int):
        raise TypeError(f"expected an INTEGER, got {value!r}")
    return value


def optional_integer(value: Value) -> int | None:
    return None if value is None else integer(value)


def text(value: Value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected TEXT, got {type(value).__name__}")
    return value


def optional_text(value: Value) -> str | None:
    return None if value is None else text(value)


def blob(value: Value) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"expected a BLOB, got {type(value).__name__}")
    return value


def flag(value: Value) -> bool:
    return bool(integer(value))


def headers(value: Value) -> tuple[tuple[str, str], ...]:
    """A schedule's ``headers`` column (a JSON list of ``[name, value]`` pairs)."""
    stored = text(value)
    if stored == "[]":  # most schedules: no parsing (a list page reads 51 rows)
        return ()
    return tuple((str(name), str(item)) for name, item in json.loads(stored))


def headers_column(pairs: Iterable[tuple[str, str]]) -> str:
    """The ``headers`` column's text for ``pairs``: the inverse of :func:`headers`."""
    return json.dumps([list(pair) for pair in pairs], separators=(",", ":"))


def enum_of(kind: type[E]) -> Callable[[Value], E]:
    """A converter to the enum ``kind`` from its stored value (a dict look-up: calling
    the enum costs several times more, and the planner converts one per due schedule)."""
    members = {member.value: member for member in kind}

    def convert(value: Value) -> E:
        try:
            return members[value]
        except KeyError:
            raise TypeError(f"{value!r} is not a {kind.__name__}") from None

    return convert


def optional_enum_of(kind: type[E]) -> Callable[[Value], E | None]:
    required = enum_of(kind)

    def convert(value: Value) -> E | None:
        return None if value is None else required(value)

    return convert
