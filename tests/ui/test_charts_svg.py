"""The SVG builders of ui/charts.py: figures become bars of the right height, each chart
has an accessible name, and no data is said so instead of drawn."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from appliance.core.instants import parse_instant
from appliance.core.runs import RunState
from appliance.store.figures.charts import HOUR_MS, HourDeliveries, HourLateness, StripRun
from appliance.ui import charts

START = parse_instant("2026-08-06T00:00:00Z")
SVG = "{http://www.w3.org/2000/svg}"


def rects(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter(f"{SVG}rect"))


def test_the_busiest_hour_fills_the_plot_and_others_scale_to_it() -> None:
    figures = [
        HourDeliveries(hour=START, succeeded=6, retried=2, failed=2),
        HourDeliveries(hour=START + 5 * HOUR_MS, succeeded=5, retried=0, failed=0),
    ]
    bars = charts.delivery_bars(figures, START)
    assert [(b.kind, b.height) for b in bars] == [
        ("succeeded", 72.0),
        ("retried", 24.0),
        ("failed", 24.0),
        ("succeeded", 60.0),
    ]
    bottom = charts.PLOT_TOP + charts.PLOT_HEIGHT
    assert bars[0].y == bottom - 72 and bars[2].y == charts.PLOT_TOP  # stacked to the top
    assert bars[3].x > bars[0].x  # hour 5 sits right of hour 0


def test_the_deliveries_svg_carries_its_bars_and_an_accessible_name() -> None:
    figures = [HourDeliveries(hour=START + HOUR_MS, succeeded=3, retried=1, failed=0)]
    svg = str(charts.deliveries_chart(figures, START))
    root = ET.fromstring(svg)
    assert root.get("role") == "img"
    label = (
        "Deliveries per hour, last 24 hours (UTC): 3 succeeded, 1 succeeded after retries, 0 failed"
    )
    assert root.get("aria-label") == label
    assert root.findtext(f"{SVG}title") == label
    drawn = [(r.get("class"), float(r.get("height", "0"))) for r in rects(svg)]
    assert drawn == [("succeeded", 90.0), ("retried", 30.0)]
    assert "01:00 UTC: 3 succeeded" in svg
    assert charts.deliveries_rows(figures) == [("01:00", 3, 1, 0)]


def test_no_data_is_said_not_drawn() -> None:
    assert str(charts.deliveries_chart([], START)) == (
        '<p class="chart-empty">No deliveries yet in the last 24 hours.</p>'
    )
    assert "<svg" not in str(charts.lateness_chart([], START))
    assert str(charts.sparkline([])) == ""


def test_lateness_bars_scale_to_the_highest_p95() -> None:
    figures = [
        HourLateness(hour=START, runs=4, p50_ms=100, p95_ms=400),
        HourLateness(hour=START + 23 * HOUR_MS, runs=1, p50_ms=800, p95_ms=800),
    ]
    heights = [(b.kind, b.height) for b in charts.lateness_bars(figures, START)]
    assert heights == [("p95", 60.0), ("p50", 15.0), ("p95", 120.0), ("p50", 120.0)]
    svg = str(charts.lateness_chart(figures, START))
    assert ET.fromstring(svg).get("aria-label") == (
        "Lateness p50 and p95 per hour, last 24 hours (UTC): 5 runs, highest p95 800 ms"
    )
    assert charts.lateness_rows(figures) == [
        ("00:00", 4, "100 ms", "400 ms"),
        ("23:00", 1, "800 ms", "800 ms"),
    ]


def test_the_sparkline_skips_runs_without_lateness() -> None:
    runs = [
        StripRun(
            id=f"run_{i}",
            state=RunState.SUCCEEDED,
            scheduled_for=START,
            attempts=1,
            lateness_ms=late,
        )
        for i, late in enumerate([0, None, 2_000, 1_000])
    ]
    points = charts.sparkline_points(runs)
    assert [x for x, _ in points] == [30.0, 150.0, 210.0]
    assert [y for _, y in points] == [38.0, 2.0, 20.0]
    root = ET.fromstring(str(charts.sparkline(runs)))
    assert root.get("aria-label") == (
        "Lateness of the last 3 runs finished at their first attempt: lowest 0 ms,"
        " highest 2 s, newest 1 s"
    )


def test_text_in_a_chart_is_escaped() -> None:
    element = charts._element("text", {"x": '"><script>'}, charts.escape("<b>&"))
    assert str(element) == '<text x="&#34;&gt;&lt;script&gt;">&lt;b&gt;&amp;</text>'


def test_a_lone_lateness_is_a_marker_with_its_value_not_a_stray_dot() -> None:
    runs = [
        StripRun(
            id="run_0", state=RunState.SUCCEEDED, scheduled_for=START, attempts=1, lateness_ms=850
        )
    ]
    svg = str(charts.sparkline(runs))
    root = ET.fromstring(svg)
    assert root.get("aria-label") == (
        "Lateness of the one run so far finished at its first attempt: 850 ms"
    )
    assert root.find(f"{SVG}polyline") is None  # a line through one point draws nothing
    marker = root.find(f"{SVG}line")
    assert marker is not None and marker.get("class") == "spark"
    assert float(marker.get("x2", "0")) - float(marker.get("x1", "0")) == 24
    assert marker.get("y1") == marker.get("y2") == str(charts.SPARK_HEIGHT / 2)
    text = root.find(f"{SVG}text")
    assert text is not None and text.text == "one run so far: 850 ms"
    # at the left, past the marker: the rest of the 240-unit box is room for the words
    assert float(marker.get("x1", "")) < float(text.get("x", "")) <= 40
