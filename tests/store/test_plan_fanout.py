"""A pass with occurrences fanned out per (spec, cursor) writes exactly the rows, cursors
and events a pass reading the occurrence cache schedule by schedule writes — for every
schedule kind, with jitter, bounds, catch-up policies and per-pass bounds in play."""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw
import pytest

from appliance.core.occurrence_cache import OccurrenceCache
from appliance.store.infra.database import Database
from appliance.store.usecases import plan_pass
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from bench.planner import build_template

T0 = 1_796_164_890_000  # a whole second
# Small bounds, so passes hit them: per-schedule occurrences, late deliveries, batch.
CONFIG = PlannerConfig(batch=150, max_occurrences=40, max_catchup=3, max_missed_events=5)


def _vary(path: Path) -> None:
    """Jitter, catch-up policies and windows by row; a third of the cursors an hour
    behind (the appliance was down), so catch-up and its bounds come into play."""
    conn = apsw.Connection(str(path))
    with conn:
        conn.execute(
            "UPDATE schedules SET jitter_seconds = (rowid % 4) * (rowid % 7),"
            " catchup_policy = CASE rowid % 3 WHEN 0 THEN 'all' WHEN 1 THEN 'latest'"
            " ELSE 'skip' END, catchup_window_seconds = 600 + (rowid % 5) * 900"
        )
        conn.execute(
            "UPDATE schedules SET next_fire_at = next_fire_at - 3600000"
            " WHERE rowid % 3 = 0 AND next_fire_at IS NOT NULL"
            " AND (every_seconds IS NULL OR every_seconds <= 600)"
        )
    conn.close()


def _plan(path: Path) -> tuple[list[tuple[object, ...]], ...]:
    db = Database.open(path)
    cache = OccurrenceCache()
    try:
        for second in range(0, 90, 3):
            while db.write_now(
                plan_once, now=T0 + second * 1000, config=CONFIG, occurrences=cache
            ).more:
                pass
        return db.read_now(
            lambda conn: (
                list(conn.execute("SELECT * FROM job_runs ORDER BY id")),
                list(conn.execute("SELECT id, next_fire_at FROM schedules ORDER BY id")),
                # In the order written (event ids are random: not compared).
                list(
                    conn.execute(
                        "SELECT seq, tenant_id, type, schedule_id, run_id, occurred_at, data"
                        " FROM events ORDER BY seq"
                    )
                ),
            )
        )
    finally:
        db.close()


def test_fanned_out_passes_write_the_rows_of_schedule_by_schedule_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fanned, direct = tmp_path / "fanned.db", tmp_path / "direct.db"
    build_template(fanned, n=600, now=T0 - 1, mix="kinds")
    _vary(fanned)
    shutil.copyfile(fanned, direct)

    with_fan_out = _plan(fanned)
    # The same passes, each schedule reading the planner's cache itself.
    monkeypatch.setattr(plan_pass, "FannedOut", lambda cache, **_: cache)
    without = _plan(direct)

    runs, cursors, events = with_fan_out
    assert len(runs) > 2_000  # enough planned to mean something
    assert {row[7] for row in runs} == {"pending", "missed"}  # delivered and missed both
    assert (runs, cursors, events) == without
