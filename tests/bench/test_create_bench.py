"""``bench.create`` at a tiny size, so it cannot rot: every create it sends is answered 201
and lands in the database, singly and in batches (timings are never asserted)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from bench import create

pytestmark = pytest.mark.slow


def test_the_create_bench_creates_every_schedule_it_times(tmp_path: Path) -> None:
    figures = create.create_once(tmp_path, creates=16, batches=2, batch_size=10)
    for name in ("single_1", "single_8", "batch"):
        assert figures[f"{name}_per_s"] > 0 and figures[f"{name}_cpu_ms"] > 0
    (db_path,) = tmp_path.glob("create-*/steeple.db")
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        ((schedules,),) = conn.execute("SELECT COUNT(*) FROM schedules").fetchall()
        ((events,),) = conn.execute(
            "SELECT COUNT(*) FROM events WHERE type = 'schedule.created'"
        ).fetchall()
    finally:
        conn.close()
    assert schedules == events == create.WARM_UP + 16 + 16 + 2 * 10
