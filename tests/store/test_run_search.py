"""A tenant's run search: every filter combination is a bounded index range read in
``(scheduled_for, id)`` order (no scan of the whole table, no sort of every match), and
filters, paging and the merge of several states combine correctly."""

from __future__ import annotations

import itertools

import apsw
import pytest

from appliance.core.runs import RunState
from appliance.store.infra.database import Database
from appliance.store.run_search import RunFilter, search_runs
from tests.store.conftest import SQLITE_ONLY, T0

S = RunState
FILTERS = {
    "states": frozenset({S.FAILED}),
    "schedule_id": "sch_x",
    "since": T0,
    "until": T0 + 60_000,
    "http_status": 500,
}


FETCH = " WHERE id IN ("  # several ranges: the page's rows, read by id after the merge


def plans(db: Database, where: RunFilter, **paging: object) -> list[str]:
    """Every query plan detail line of the ranges ``search_runs`` reads for this filter
    (the fetch of a merged page's rows by id: its own line, ``FETCH …``)."""
    seen: list[str] = []

    def read(conn: object) -> None:
        assert isinstance(conn, apsw.Connection)

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if sql.startswith("SELECT") and "FROM job_runs" in sql:
                tag = "FETCH " if FETCH in sql else ""
                for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings):
                    seen.append(tag + str(row[-1]))
            return True

        conn.exec_trace = trace
        try:
            search_runs(conn, tenant_id="ten_a", where=where, limit=50, **paging)  # type: ignore[arg-type]
        finally:
            conn.exec_trace = None

    db.read_now(read)
    return seen


COMBINATIONS = [
    dict(combo)
    for size in range(len(FILTERS) + 1)
    for combo in itertools.combinations(FILTERS.items(), size)
]


@SQLITE_ONLY
@pytest.mark.parametrize("filters", COMBINATIONS, ids=lambda f: "+".join(f) or "none")
@pytest.mark.parametrize("paged", [False, True], ids=["first page", "next page"])
@pytest.mark.parametrize("two_states", [False, True], ids=["one state", "two states"])
def test_every_filter_reads_an_index_range_in_order(
    db: Database, filters: dict[str, object], paged: bool, two_states: bool
) -> None:
    if two_states and "states" in filters:
        filters = {**filters, "states": frozenset({S.FAILED, S.RETRY_WAIT})}
    paging: dict[str, object] = {"before": (T0 + 30_000, "run_x")} if paged else {}
    found = plans(db, RunFilter(**filters), **paging)  # type: ignore[arg-type]
    assert found, "no query ran"
    fetches = [d for d in found if d.startswith("FETCH ")]
    assert all("USING INDEX sqlite_autoindex_job_runs_1 (id=?)" in d for d in fetches), found
    found = [d for d in found if not d.startswith("FETCH ")]
    for detail in found:
        assert "USING INDEX" in detail or "USING COVERING INDEX" in detail, found
        assert "TEMP B-TREE" not in detail, found
        if paged:  # the range starts at the cursor: a deep page reads no earlier pages
            assert "scheduled_for<?" in detail or "(scheduled_for,id)<(?,?)" in detail, found
    if "schedule_id" not in filters:  # a tenant's runs are read by the tenant's own index
        assert all("job_runs_tenant" in detail for detail in found), found
