"""``bench.pages`` at a tiny size, so it cannot rot: every page answers 200 and gets a
figure (timings are never asserted)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench import pages

pytestmark = pytest.mark.slow


def test_the_page_bench_times_every_page(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    built = pages.build(data_dir, schedules=50, runs=500)
    assert built["run_rows"] == 500 and len(built["schedule_ids"]) == 50
    figures = pages.pages_once(data_dir, built, requests=2, seed_=1)
    expected = {f"{name}_ms" for name in pages.pages(built, random.Random(0))}
    assert set(figures) == expected and "admin_health_ms" in figures
    assert all(value > 0 for value in figures.values())
