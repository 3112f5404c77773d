"""The backup benchmark at a tiny size: every window delivered, the copy written, the
scrapes answered (counts only; never a time)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import backup
from bench.processes import sink

pytestmark = pytest.mark.slow


def test_backup_while_delivering_at_a_tiny_size(tmp_path: Path) -> None:
    with sink() as the_sink:
        (figures,) = backup.backup_runs(
            tmp_path,
            schedules=200,
            runs=2_000,
            rate=10,
            window_s=2,
            scrape_count=3,
            repetitions=1,
            the_sink=the_sink,
        )
    assert figures["run_rows"] == 2_000 and figures["offered_per_s"] == 10
    assert figures["without_undelivered"] == 0 and figures["with_undelivered"] == 0
    assert figures["with_window_s"] >= 1 and figures["backup_mb"] > 0
    assert figures["metrics_kb"] > 0
    assert not list(tmp_path.glob("backup-*/copy-*.db"))  # each copy is deleted after its run
