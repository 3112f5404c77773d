"""bench.claims at a tiny size, so it cannot rot: the backlog is drained in whole batches
and every tenant is served (timings are never asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import claims

pytestmark = pytest.mark.slow


def test_the_claims_bench_drains_the_backlog_in_batches(tmp_path: Path) -> None:
    (figures,) = claims.claim_runs_for(tmp_path, backlog=40, tenants=3, batch=8, runs=1)
    assert figures["claimed"] == 40 and figures["claims"] == 5
    assert figures["cpu_ms_per_claim"] > 0
