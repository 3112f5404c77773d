"""What ``GET /metrics`` counts: what happened since its last look (or, at its first,
since the process started), read from the event log by cursor (``events.seq``: one
writer, so sequence numbers commit in order), beside the operator's gauges of the same
snapshot (:func:`appliance.store.figures.operator.operator_figures`). The ``/metrics`` collector
keeps process-lifetime counters from it, so the engine carries no instrumentation of its
own.

A run's outcome events (``schedule.run.succeeded|retrying|failed``) count deliveries by
outcome; ``schedule.run.missed`` and ``…failed`` carry a reason; ``clock.jump_detected``
counts jumps. A run's lateness and an event's count follow
:mod:`appliance.store.figures.basis`, as the operator's percentiles and jumps do.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.store.figures.basis import (
    FIRST_ATTEMPT_JOIN,
    LATENESS_SQL,
    event_fields,
    occurrences,
)
from appliance.store.figures.operator import Figures, operator_figures
from appliance.store.infra.connection import Connection
from appliance.store.infra.disk import Disk

BATCH = 50_000  # events read per scrape at most; the rest at the next one
COUNTED_EVENTS = (
    "schedule.run.succeeded",
    "schedule.run.retrying",
    "schedule.run.failed",
    "schedule.run.missed",
    "clock.jump_detected",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SeenEvent:
    type: str
    reason: str | None
    count: int  # a summary event stands for several runs
    lateness_ms: int | None  # a run finished at its first attempt: start − due_at


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """One scrape's read, in one snapshot: the gauges and what happened since."""

    figures: Figures
    events_to: int  # the last event seq looked at
    events: list[SeenEvent]


def read_since(conn: Connection, *, events_from: int, disk: Disk, now: int) -> Reading:
    """The operator's figures (:func:`appliance.store.figures.operator.operator_figures`) plus the
    counted events after ``events_from``: the previous scrape's ``events_to``, or for the
    first scrape the newest seq when the process started (``store.events.latest_seq``, read
    by the runtime), so what the engine did before anyone scraped is counted too."""
    figures = operator_figures(conn, disk=disk, now=now)
    events_to, events = _events_after(conn, events_from)
    return Reading(figures=figures, events_to=events_to, events=events)


def _events_after(conn: Connection, seq: int) -> tuple[int, list[SeenEvent]]:
    rows = conn.execute(
        "SELECT e.seq, e.type, e.data, CASE WHEN e.type IN"
        " ('schedule.run.succeeded', 'schedule.run.failed') AND r.attempt = 1"
        f" THEN {LATENESS_SQL} END"
        " FROM (SELECT seq, type, data, run_id FROM events WHERE seq > ? ORDER BY seq LIMIT ?) e"
        f" LEFT JOIN job_runs r ON r.id = e.run_id LEFT JOIN {FIRST_ATTEMPT_JOIN} ORDER BY e.seq",
        (seq, BATCH),
    ).fetchall()
    seen, last = [], seq
    for s, kind, data, late in rows:
        last = int(str(s))
        if kind not in COUNTED_EVENTS:
            continue
        fields = event_fields(data)
        reason = fields.get("reason")
        seen.append(
            SeenEvent(
                type=str(kind),
                reason=None if reason is None else str(reason),
                count=occurrences(fields),
                lateness_ms=None if late is None else int(str(late)),
            )
        )
    return last, seen
