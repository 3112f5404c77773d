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


def test_steady_with_event_streams_attached_counts_what_they_received(tmp_path: Path) -> None:
    from bench import steady
    from bench.processes import sink

    with sink() as the_sink:
        figures = steady.steady_once(
            tmp_path, rate=10, duration_s=2, the_sink=the_sink, sse_clients=3
        )
    assert figures["undelivered"] == 0 and figures["sse_clients"] == 3
    assert figures["sse_events_per_client"] >= 20  # every delivery's event, to every stream
