"""The event feed's queries: every filter is a bounded index range in seq order (no scan of
a tenant's whole history, no sort of every match), and filters combine correctly."""

from __future__ import annotations

import apsw
import pytest

from appliance.core.events import EventType
from appliance.store.events import SYSTEM_TENANT, append_event, list_events
from appliance.store.infra.database import Database
from tests.store.conftest import SQLITE_ONLY

NOW = 1_790_000_000_000
E = EventType


def plans(db: Database, **filters: object) -> list[str]:
    """Every query plan detail line ``list_events`` runs for these filters."""
    seen: list[str] = []

    def read(conn: object) -> None:
        assert isinstance(conn, apsw.Connection)

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if sql.startswith("SELECT") and "FROM events" in sql:
                for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings):
                    seen.append(str(row[-1]))
            return True

        conn.exec_trace = trace
        try:
            list_events(conn, tenant_id="ten_a", limit=50, **filters)  # type: ignore[arg-type]
        finally:
            conn.exec_trace = None

    db.read_now(read)
    return seen


@SQLITE_ONLY
@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"types": frozenset({E.RUN_FAILED})},
        {"types": frozenset({E.RUN_FAILED, E.SCHEDULE_PAUSED})},
        {"schedule_id": "sch_x"},
        {"schedule_id": "sch_x", "types": frozenset({E.RUN_FAILED})},
    ],
    ids=["none", "one type", "two types", "schedule", "schedule and type"],
)
def test_every_filter_reads_an_index_range_in_seq_order(
    db: Database, filters: dict[str, object]
) -> None:
    found = plans(db, **filters)
    assert found, "no query ran"
    for detail in found:
        assert "USING INDEX" in detail or "USING COVERING INDEX" in detail, found
        assert "TEMP B-TREE" not in detail, found


def test_filters_combine_and_system_events_join_in_order(db: Database) -> None:
    def add(tenant: str, type_: EventType, schedule: str | None = None) -> None:
        db.write_now(append_event, tenant_id=tenant, type=type_, now=NOW, schedule_id=schedule)

    add("ten_a", E.SCHEDULE_CREATED, "sch_1")
    add(SYSTEM_TENANT, E.CLOCK_JUMP_DETECTED)
    add("ten_a", E.RUN_FAILED, "sch_1")
    add("ten_b", E.RUN_FAILED, "sch_2")
    add("ten_a", E.RUN_FAILED, "sch_3")
    add("ten_a", E.SCHEDULE_PAUSED, "sch_1")

    def seqs(**filters: object) -> list[int]:
        return [e.seq for e in db.read_now(list_events, tenant_id="ten_a", **filters)]  # type: ignore[arg-type]

    assert seqs() == [1, 2, 3, 5, 6]
    assert seqs(after=2, limit=2) == [3, 5]
    assert seqs(types=frozenset({E.RUN_FAILED})) == [3, 5]
    assert seqs(types=frozenset({E.RUN_FAILED, E.CLOCK_JUMP_DETECTED})) == [2, 3, 5]
    assert seqs(schedule_id="sch_1") == [1, 3, 6]
    assert seqs(schedule_id="sch_1", types=frozenset({E.SCHEDULE_PAUSED})) == [6]
    assert seqs(schedule_id="sch_2") == []
