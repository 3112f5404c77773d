"""bench.events at a tiny size, so it cannot rot. Timings are never asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import events

pytestmark = pytest.mark.slow


def test_events_bench_runs_and_reports_every_figure(tmp_path: Path) -> None:
    built = events.build(tmp_path / "data", events=3_000)
    figures = events.events_once(tmp_path / "data", built, requests=5, seed_=1)
    assert set(figures) == {
        f"{kind}_{figure}"
        for kind in ("feed", "failed", "schedule")
        for figure in ("p50_ms", "p99_ms", "cpu_ms")
    }
