"""The counts the dashboard, the operator's tenant list and the health page show read
index entries only (``job_runs_tenant_finished``), and stop at ``COUNT_CAP``: their cost
does not grow with a tenant's history (bench/HISTORY.md, "Web UI pages")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.store.figures.tenants import COUNT_CAP, FINISHED_SINCE_SQL
from appliance.store.infra.database import Database
from appliance.ui.render import capped


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """This module tests SQLite itself (its file, pragmas or query plans): SQLite only."""
    database = Database.open(tmp_path / "steeple.db")
    yield database
    database.close()


def plan(db: Database, sql: str, *args: object) -> list[str]:
    return db.read_now(
        lambda conn: [str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args)]
    )


def test_finished_counts_are_covering_index_ranges(inline_db: Database) -> None:
    (step,) = plan(inline_db, FINISHED_SINCE_SQL.sqlite, "ten_x", "succeeded", 0)
    assert "COVERING INDEX job_runs_tenant_finished" in step
    assert "<expr>>?" in step  # the time bound is part of the range, not a filter


def test_counts_past_the_cap_show_as_more() -> None:
    assert capped(COUNT_CAP) == str(COUNT_CAP)
    assert capped(COUNT_CAP + 1) == f"{COUNT_CAP}+"
