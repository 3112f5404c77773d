"""The web UI's charts as server-rendered SVG (docs/ui.md, "Dashboard", "A schedule's
page"): deliveries per hour stacked by outcome, lateness p50/p95 per hour, a schedule's
strip of recent runs and its lateness sparkline. Pure functions of the figures
(:mod:`appliance.store.figures.charts`): no JavaScript, no library.

Rules this module guards:

- Every chart has an accessible name (``role="img"``, ``aria-label`` and a ``<title>``
  saying the totals) and the page carries the same numbers as a table for screen
  readers (:func:`deliveries_rows`, :func:`lateness_rows`): a chart never holds a figure
  the table does not.
- Colours are classes (``web/static/charts.css`` maps them to steeple.css's custom
  properties, which have dark values); nothing here names a colour. The page's CSP
  allows no inline style, so no ``style`` attribute either.
- The SVG is built by :func:`_element`, which escapes every attribute value and text:
  its :class:`~markupsafe.Markup` holds no tenant string unescaped.
- No data is said so (:data:`NO_DELIVERIES`), never drawn as an empty frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup, escape

from appliance.core.instants import format_instant
from appliance.store.figures.charts import (
    HOUR_MS,
    HOURS,
    DashboardFigures,
    HourDeliveries,
    HourLateness,
    StripRun,
)

WIDTH: Final = 480  # the viewBox; the SVG scales to its box
PLOT_TOP: Final = 16
PLOT_HEIGHT: Final = 120
AXIS: Final = 20  # room for the hour labels below the plot
LABEL_EVERY: Final = 6  # an hour label every this many bars
NO_DELIVERIES: Final = "No deliveries yet in the last 24 hours."
NO_LATENESS: Final = "No run finished at its first attempt in the last 24 hours."
KINDS: Final = ("succeeded", "retried", "failed")  # bottom to top


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str  # a class: succeeded, retried, failed, p50, p95
    title: str


def hours(start: int) -> list[int]:
    """The window's hours, oldest first."""
    return [start + i * HOUR_MS for i in range(HOURS)]


def hour_label(hour: int) -> str:
    """``13:00``: an hour's start in UTC."""
    return format_instant(hour)[11:16]


def short_duration(ms: int) -> str:
    """``850 ms``, ``2.5 s``, ``3 min``: a lateness, compact enough for a chart."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.3g} s"
    return f"{ms / 60_000:.3g} min"


def _slot() -> float:
    return WIDTH / HOURS


def _height(value: int, top: int) -> float:
    """``value`` as a bar height on a plot whose tallest bar is ``top``."""
    return 0.0 if top <= 0 else round(PLOT_HEIGHT * value / top, 2)


def delivery_bars(figures: Sequence[HourDeliveries], start: int) -> list[Bar]:
    """The stacked bars: per hour, succeeded at the bottom, then retried, then failed;
    the busiest hour fills the plot. Hours with no delivery have no bar."""
    by_hour = {f.hour: f for f in figures}
    top = max((f.succeeded + f.retried + f.failed for f in figures), default=0)
    bars: list[Bar] = []
    slot = _slot()
    for i, hour in enumerate(hours(start)):
        figure = by_hour.get(hour)
        if figure is None:
            continue
        base = float(PLOT_TOP + PLOT_HEIGHT)
        for kind, count in zip(
            KINDS, (figure.succeeded, figure.retried, figure.failed), strict=True
        ):
            if not count:
                continue
            height = _height(count, top)
            base = round(base - height, 2)
            bars.append(
                Bar(
                    x=round(i * slot + 1, 2),
                    y=base,
                    width=round(slot - 2, 2),
                    height=height,
                    kind=kind,
                    title=f"{hour_label(hour)} UTC: {count} {kind}",
                )
            )
    return bars


def lateness_bars(figures: Sequence[HourLateness], start: int) -> list[Bar]:
    """Per hour, a wide p95 bar with the narrower p50 bar in front of it; the largest
    p95 fills the plot."""
    by_hour = {f.hour: f for f in figures}
    top = max((f.p95_ms for f in figures), default=0)
    bars: list[Bar] = []
    slot = _slot()
    bottom = PLOT_TOP + PLOT_HEIGHT
    for i, hour in enumerate(hours(start)):
        figure = by_hour.get(hour)
        if figure is None:
            continue
        for kind, value, inset in (("p95", figure.p95_ms, 1.0), ("p50", figure.p50_ms, slot / 4)):
            height = _height(value, top)
            bars.append(
                Bar(
                    x=round(i * slot + inset, 2),
                    y=round(bottom - height, 2),
                    width=round(slot - 2 * inset, 2),
                    height=height,
                    kind=kind,
                    title=f"{hour_label(hour)} UTC: {kind} {short_duration(value)}",
                )
            )
    return bars


def deliveries_label(figures: Sequence[HourDeliveries]) -> str:
    ok = sum(f.succeeded for f in figures)
    retried = sum(f.retried for f in figures)
    failed = sum(f.failed for f in figures)
    return (
        f"Deliveries per hour, last 24 hours (UTC): {ok} succeeded, {retried} succeeded"
        f" after retries, {failed} failed"
    )


def lateness_label(figures: Sequence[HourLateness]) -> str:
    worst = max((f.p95_ms for f in figures), default=0)
    runs = sum(f.runs for f in figures)
    return (
        f"Lateness p50 and p95 per hour, last 24 hours (UTC): {runs} runs,"
        f" highest p95 {short_duration(worst)}"
    )


def deliveries_chart(figures: Sequence[HourDeliveries], start: int) -> Markup:
    """The dashboard's deliveries chart, or :data:`NO_DELIVERIES` as a paragraph."""
    if not figures:
        return _element("p", {"class": "chart-empty"}, escape(NO_DELIVERIES))
    top = max(f.succeeded + f.retried + f.failed for f in figures)
    return _plot(
        "deliveries", deliveries_label(figures), delivery_bars(figures, start), start, str(top)
    )


def lateness_chart(figures: Sequence[HourLateness], start: int) -> Markup:
    """The dashboard's lateness chart, or :data:`NO_LATENESS` as a paragraph."""
    if not figures:
        return _element("p", {"class": "chart-empty"}, escape(NO_LATENESS))
    top = short_duration(max(f.p95_ms for f in figures))
    return _plot("lateness", lateness_label(figures), lateness_bars(figures, start), start, top)


def deliveries_rows(figures: Sequence[HourDeliveries]) -> list[tuple[str, int, int, int]]:
    """The table fallback: (hour, succeeded, retried, failed) per hour with deliveries."""
    return [(hour_label(f.hour), f.succeeded, f.retried, f.failed) for f in figures]


def lateness_rows(figures: Sequence[HourLateness]) -> list[tuple[str, int, str, str]]:
    """The table fallback: (hour, runs, p50, p95) per hour with runs."""
    return [
        (hour_label(f.hour), f.runs, short_duration(f.p50_ms), short_duration(f.p95_ms))
        for f in figures
    ]


SPARK_WIDTH: Final = 240
SPARK_HEIGHT: Final = 40


def sparkline_points(runs: Sequence[StripRun]) -> list[tuple[float, float]]:
    """The sparkline's points, one per run with a lateness, placed at the run's cell
    (oldest left); the largest lateness touches the top, 0 the bottom."""
    if not runs:
        return []
    top = max((r.lateness_ms or 0 for r in runs), default=0)
    step = SPARK_WIDTH / max(1, len(runs))
    points = []
    for i, run in enumerate(runs):
        if run.lateness_ms is None:
            continue
        y = SPARK_HEIGHT - 2 - (0 if top == 0 else (SPARK_HEIGHT - 4) * run.lateness_ms / top)
        points.append((round(step * (i + 0.5), 2), round(y, 2)))
    return points


def sparkline_label(runs: Sequence[StripRun]) -> str:
    lates = [r.lateness_ms for r in runs if r.lateness_ms is not None]
    if not lates:
        return "Lateness: no run finished at its first attempt"
    if len(lates) == 1:
        return (
            "Lateness of the one run so far finished at its first attempt:"
            f" {short_duration(lates[0])}"
        )
    return (
        f"Lateness of the last {len(lates)} runs finished at their first attempt:"
        f" lowest {short_duration(min(lates))}, highest {short_duration(max(lates))},"
        f" newest {short_duration(lates[-1])}"
    )


def sparkline(runs: Sequence[StripRun]) -> Markup:
    """The schedule page's lateness sparkline; empty Markup when no run has a lateness."""
    points = sparkline_points(runs)
    if not points:
        return Markup("")
    label = sparkline_label(runs)
    body = _element("title", {}, escape(label))
    lates = [r.lateness_ms for r in runs if r.lateness_ms is not None]
    if len(lates) == 1:
        body += _lone_point(lates[0])
    else:
        path = " ".join(f"{x},{y}" for x, y in points)
        body += _element("polyline", {"class": "spark", "points": path}, Markup(""))
        for x, y in points:
            body += _element("circle", {"class": "spark-dot", "cx": x, "cy": y, "r": 2}, Markup(""))
    return _element(
        "svg",
        {
            "class": "sparkline",
            "viewBox": f"0 0 {SPARK_WIDTH} {SPARK_HEIGHT}",
            "role": "img",
            "aria-label": label,
            "xmlns": "http://www.w3.org/2000/svg",
        },
        body,
    )


def _lone_point(lateness_ms: int) -> Markup:
    """One lateness has no line to draw and no scale to sit on: a short level marker at
    the left, at mid-height, with its dot, and the value written after it (the whole width
    left for the text, so a phone's box does not clip it)."""
    y = SPARK_HEIGHT / 2
    body = _element("line", {"class": "spark", "x1": 2, "y1": y, "x2": 26, "y2": y}, Markup(""))
    body += _element("circle", {"class": "spark-dot", "cx": 14, "cy": y, "r": 3}, Markup(""))
    text = {"class": "spark-value", "x": 32, "y": y + 4}
    return body + _element("text", text, escape(f"one run so far: {short_duration(lateness_ms)}"))


def _plot(name: str, label: str, bars: Sequence[Bar], start: int, top: str) -> Markup:
    body = _element("title", {}, escape(label))
    bottom = PLOT_TOP + PLOT_HEIGHT
    body += _element(
        "line", {"class": "axis", "x1": 0, "y1": bottom, "x2": WIDTH, "y2": bottom}, Markup("")
    )
    body += _element("text", {"class": "tick", "x": 2, "y": PLOT_TOP - 4}, escape(top))
    for bar in bars:
        rect = {"class": bar.kind, "x": bar.x, "y": bar.y, "width": bar.width, "height": bar.height}
        body += _element("rect", rect, _element("title", {}, escape(bar.title)))
    slot = _slot()
    for i, hour in enumerate(hours(start)):
        if i % LABEL_EVERY == 0:
            at = {"class": "tick", "x": round(i * slot + 1, 2), "y": bottom + AXIS - 4}
            body += _element("text", at, escape(hour_label(hour)))
    return _element(
        "svg",
        {
            "class": f"chart {name}",
            "id": f"chart-{name}",
            "viewBox": f"0 0 {WIDTH} {bottom + AXIS}",
            "role": "img",
            "aria-label": label,
            "xmlns": "http://www.w3.org/2000/svg",
        },
        body,
    )


def _element(tag: str, attributes: dict[str, object], content: Markup) -> Markup:
    """``<tag a="v">content</tag>`` with every value escaped; ``content`` is Markup."""
    attrs = "".join(f' {name}="{escape(str(value))}"' for name, value in attributes.items())
    return Markup(f"<{tag}{attrs}>") + content + Markup(f"</{tag}>")


@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardCharts:
    deliveries: Markup
    lateness: Markup
    delivery_rows: list[tuple[str, int, int, int]]
    lateness_rows: list[tuple[str, int, str, str]]


def dashboard_charts(figures: DashboardFigures) -> DashboardCharts:
    """The dashboard's two charts and their table fallbacks."""
    return DashboardCharts(
        deliveries=deliveries_chart(figures.deliveries, figures.start),
        lateness=lateness_chart(figures.lateness, figures.start),
        delivery_rows=deliveries_rows(figures.deliveries),
        lateness_rows=lateness_rows(figures.lateness),
    )


# A mark per state beside its colour, so the strip does not rely on colour alone.
STATE_MARKS: Final = {
    "succeeded": "✓",
    "failed": "✗",
    "missed": "–",
    "cancelled": "/",
    "retry_wait": "↻",
    "running": "…",
    "pending": "·",
}
