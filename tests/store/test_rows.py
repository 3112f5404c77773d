"""Rows to records by column name: the one helper every store query reads through."""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import pytest

from appliance.core.runs import RunState
from appliance.store.infra import rows


@dataclass(frozen=True, slots=True, kw_only=True)
class Thing:
    name: str
    state: RunState
    size: int | None
    tags: tuple[tuple[str, str], ...]


COLUMNS = rows.Columns(
    Thing,
    ["name", "state", "size", "tags"],
    sql={"size": "length(body)"},
    convert={"state": rows.enum_of(RunState), "tags": rows.headers},
)


def test_the_select_list_names_each_field_and_records_are_built_by_name() -> None:
    assert COLUMNS.select == "name, state, length(body) AS size, tags"
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE t (tags TEXT, body BLOB, state TEXT, name TEXT)")  # any order
    conn.execute("""INSERT INTO t VALUES ('[["X-A","1"]]', x'0102', 'pending', 'n')""")
    (thing,) = COLUMNS.all(conn.execute(f"SELECT {COLUMNS.select} FROM t"))
    assert thing == Thing(name="n", state=RunState.PENDING, size=2, tags=(("X-A", "1"),))


def test_a_wrongly_typed_column_is_named() -> None:
    strict = rows.Columns(Thing, ["name", "state", "size", "tags"], convert={"size": rows.integer})
    with pytest.raises(TypeError, match="column size: expected an INTEGER"):
        strict.one(("n", RunState.PENDING, "12", ()))
    with pytest.raises(ValueError, match="no such fields: colour"):
        rows.Columns(Thing, ["name"], convert={"colour": rows.text})


def test_the_headers_column_round_trips() -> None:
    pairs = (("X-Team", "billing"), ("X-Empty", ""))
    assert rows.headers(rows.headers_column(pairs)) == pairs
    assert rows.headers(rows.headers_column(())) == ()
