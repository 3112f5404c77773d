"""Scenario 4 — the downtime matrix: stopped for 30 s, 1 h or 3 d, with catch-up policy
``all``, ``latest`` or ``skip``, for schedules firing every 15 s, minute, hour and day.

The appliance runs in process on virtual time (trio ``MockClock`` with autojump and a
``TrioWallClock`` derived from it): it runs from 23:50:00Z, is stopped at 23:59:50Z (every
cursor then points at midnight, nothing is in flight), stays down for the downtime while
both clocks advance, and restarts on the same database file the way ``runtime`` boots:
reopen (migrate, ``quick_check``), new incarnation, ``reclaim_previous``, then planner,
dispatcher and reaper.

For the occurrences that fell due while it was down (``midnight ≤ scheduled_for ≤
restart``) every cell compares what the appliance did with what the ADR 0033 rules say,
computed here independently by arithmetic (these UTC cadences need no cron library):

- an occurrence at most 60 s late at planning is not a misfire and is delivered;
- a misfire inside the catch-up window (1 h) is delivered late under ``all``; under
  ``latest`` only the newest misfire is (the one whose successor is not a misfire);
  under ``skip`` none is; everything older than the window is missed;
- ``all`` delivers at most 100 late occurrences per schedule per pass (the rest in the
  next pass), a pass examines at most 10,000 occurrences per schedule, and a pass with
  more than 100 missed rows for one schedule records one summary event per reason
  instead of one event per row.

Counted per cell: delivered (distinct occurrences that reached the endpoint), delivered
late (> 60 s after ``scheduled_for``), ``missed`` rows, ``schedule.run.missed`` events and
the missed count those events announce. Also checked: exactly one row per occurrence,
no duplicate delivery, every occurrence either delivered or missed, stored events valid
against ``contracts/events``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import pytest
import trio
from trio.testing import MockClock

from appliance.clock import TrioWallClock
from appliance.core.instants import parse_instant
from appliance.engine.delivery import Answer
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from appliance.store.usecases.reclaim import reclaim_previous
from tests.chaos.recorder import publish
from tests.engine.conftest import Endpoint, Received, reply, running_engine, stored_events
from tests.store.conftest import ScheduleRow, insert_schedule

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

START = parse_instant("2026-08-06T23:50:00Z")
MIDNIGHT = parse_instant("2026-08-07T00:00:00Z")
STOP = MIDNIGHT - 10 * SECOND  # after the 23:59:45 delivery, before the 23:59:58 planning
AFTER_RESTART_S = 120  # run this long after the restart: catch-up is due at once

# The ADR 0033 defaults (PlannerConfig / catch-up window), restated as the spec says them.
LOOKAHEAD = 2 * SECOND
MISFIRE = 60 * SECOND
WINDOW = HOUR
MAX_LATE_PER_PASS = 100
MAX_EXAMINED_PER_PASS = 10_000
MAX_MISSED_EVENTS = 100

CADENCES = {  # name -> (cron, period ms); all aligned to the UTC epoch
    "15s": ("*/15 * * * * *", 15 * SECOND),
    "minutely": ("* * * * *", MINUTE),
    "hourly": ("0 * * * *", HOUR),
    "daily": ("0 0 * * *", DAY),
}
POLICIES = ("all", "latest", "skip")
DOWNTIMES = {"30s": 30 * SECOND, "1h": HOUR, "3d": 3 * DAY}


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    delivered: int  # occurrences delivered (on time or late)
    late: int  # of those, delivered more than a minute after scheduled_for
    missed_rows: int
    missed_events: int  # schedule.run.missed events, summaries included
    missed_announced: int  # rows the events account for (1 each, or a summary's count)

    def cell(self) -> str:
        return (
            f"{self.delivered}/{self.late}/{self.missed_rows}/"
            f"{self.missed_events}/{self.missed_announced}"
        )


# --- the rules, computed independently ------------------------------------------------


def occurrences_from(period: int, first: int) -> Iterator[int]:
    """Every multiple of ``period`` at or after ``first`` (UTC-aligned cadences)."""
    current = -(-first // period) * period
    while True:
        yield current
        current += period


def verdict(occurrence: int, period: int, *, now: int, policy: str) -> str:
    """``on_time``, ``late`` (delivered as catch-up) or a miss reason."""
    lateness = now - occurrence
    if lateness <= MISFIRE:
        return "on_time"
    if lateness > WINDOW:
        return "outside_window"
    if policy == "all":
        return "late"
    if policy == "skip":
        return "skip"
    successor_misfired = now - (occurrence + period) > MISFIRE
    return "superseded" if successor_misfired else "late"


def expected(period: int, policy: str, *, cursor: int, now: int) -> Counts:
    """What the restart's planner passes must do with the occurrences due while down."""
    stream = occurrences_from(period, cursor)
    pending = next(stream)
    delivered = late = rows = events = 0
    while pending <= now + LOOKAHEAD:  # one iteration per planner pass
        examined, late_this_pass, reasons = 0, 0, []
        while pending <= now + LOOKAHEAD:
            outcome = verdict(pending, period, now=now, policy=policy)
            if examined >= MAX_EXAMINED_PER_PASS or (
                outcome == "late" and late_this_pass >= MAX_LATE_PER_PASS
            ):
                break  # deferred to the next pass
            examined += 1
            if outcome in ("on_time", "late"):
                delivered += pending <= now  # a lookahead occurrence is not "due while down"
                late_this_pass += outcome == "late"
            else:
                reasons.append(outcome)
            pending = next(stream)
        rows += len(reasons)
        events += len(reasons) if len(reasons) <= MAX_MISSED_EVENTS else len(set(reasons))
        late += late_this_pass
    return Counts(
        delivered=delivered,
        late=late,
        missed_rows=rows,
        missed_events=events,
        missed_announced=rows,
    )


def test_the_rules_model_on_hand_computed_cells() -> None:
    """The model itself, against numbers worked out by hand."""
    restart = MIDNIGHT - 10 * SECOND + HOUR  # down 1 h: 00:00:00 .. 00:59:50 fell due
    minutely_all = expected(MINUTE, "all", cursor=MIDNIGHT, now=restart)
    # 60 occurrences; 00:59:00 is 50 s late (on time), 00:00..00:58 (59) are late.
    assert minutely_all == Counts(
        delivered=60, late=59, missed_rows=0, missed_events=0, missed_announced=0
    )
    # 240 occurrences every 15 s, 236 misfired: 100 + 100 + 36 late over three passes.
    assert expected(15 * SECOND, "all", cursor=MIDNIGHT, now=restart).late == 236
    # Down 3 d minutely, skip: 4320 occurrences, one on time, the rest missed: two
    # reasons (outside the window, skipped) -> two summaries.
    skip = expected(MINUTE, "skip", cursor=MIDNIGHT, now=MIDNIGHT - 10 * SECOND + 3 * DAY)
    assert skip == Counts(
        delivered=1, late=0, missed_rows=4319, missed_events=2, missed_announced=4319
    )


# --- the appliance --------------------------------------------------------------------


@dataclass
class Recorder:
    """The tenant endpoint: (schedule id, scheduled_for text, wall ms at arrival)."""

    wall: TrioWallClock
    seen: list[tuple[str, str, int]]

    async def respond(self, request: Received, n: int) -> Answer:
        headers = request.headers
        self.seen.append((headers["X-Schedule-Id"], headers["X-Scheduled-For"], self.wall.now_ms()))
        return reply(200)


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


def _query(db: Database, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
    def run(conn: apsw.Connection) -> list[tuple[object, ...]]:
        return [tuple(row) for row in conn.execute(sql, params)]

    return db.read_now(run)


def observe(db: Database, recorder: Recorder, schedule_id: str, *, restart: int) -> Counts:
    """What the appliance did with ``schedule_id``'s occurrences in [midnight, restart]."""
    rows = _query(
        db,
        "SELECT scheduled_for, state FROM job_runs WHERE schedule_id = ?"
        " AND scheduled_for BETWEEN ? AND ?",
        (schedule_id, MIDNIGHT, restart),
    )
    deliveries = [
        (parse_instant(text), at)
        for sid, text, at in recorder.seen
        if sid == schedule_id and MIDNIGHT <= parse_instant(text) <= restart
    ]
    delivered = {sched for sched, _ in deliveries}
    assert len(delivered) == len(deliveries), "an occurrence was delivered twice"
    events = [
        json.loads(str(data))
        for (data,) in _query(
            db,
            "SELECT data FROM events WHERE schedule_id = ? AND type = 'schedule.run.missed'"
            " AND occurred_at >= ?",
            (schedule_id, STOP),
        )
    ]
    missed = [sched for sched, state in rows if state == "missed"]
    assert set(delivered) | set(missed) == {sched for sched, _ in rows}, (
        "neither delivered nor missed"
    )
    return Counts(
        delivered=len(delivered),
        late=sum(at - sched > MISFIRE for sched, at in deliveries),
        missed_rows=len(missed),
        missed_events=len(events),
        missed_announced=sum(int(e.get("count", 1)) for e in events),
    )


async def run_downtime(path: Path, downtime: int) -> dict[tuple[str, str], tuple[Counts, Counts]]:
    """One database, twelve schedules (cadence x policy), one stop of ``downtime`` ms.
    Returns {(cadence, policy): (expected, observed)}."""
    wall = TrioWallClock(START)
    wall.now_ms()  # anchor wall time to trio's clock now
    db = Database.open(path, threaded=False)
    tenant = db.write_now(create_tenant, name="downtime", now=START).tenant_id
    schedules = {
        (cadence, policy): db.write_now(
            insert_schedule,
            tenant_id=tenant,
            row=ScheduleRow(
                cron=cron,
                catchup_policy=policy,
                next_fire_at=next(occurrences_from(period, START)),
            ),
            now=START,
        )
        for cadence, (cron, period) in CADENCES.items()
        for policy in POLICIES
    }
    recorder = Recorder(wall, [])
    endpoint = Endpoint(respond=recorder.respond)
    async with running_engine(db, wall, endpoint):
        await trio.sleep((STOP - START) / 1000)
    db.close()
    assert all(at <= STOP for _, _, at in recorder.seen)
    await trio.sleep(downtime / 1000)  # the process is gone; wall and trio time move on
    restart = wall.now_ms()
    db = Database.open(path, threaded=False)  # migrate + quick_check, as at boot
    try:
        incarnation = db.write_now(register_incarnation, pid=2, now=restart)
        db.write_now(reclaim_previous, incarnation_id=incarnation, now=restart)
        async with running_engine(db, wall, endpoint, incarnation_id=incarnation):
            await trio.sleep(AFTER_RESTART_S)
        cells = {}
        for (cadence, policy), sid in schedules.items():
            period = CADENCES[cadence][1]
            want = expected(period, policy, cursor=MIDNIGHT, now=restart)
            cells[(cadence, policy)] = (want, observe(db, recorder, sid, restart=restart))
        assert_one_row_per_occurrence(db, schedules, restart=restart)
        for wire, validator in stored_events(db):
            assert list(validator.iter_errors(wire)) == [], wire
    finally:
        db.close()
    return cells


def assert_one_row_per_occurrence(
    db: Database, schedules: dict[tuple[str, str], str], *, restart: int
) -> None:
    """From the first occurrence to the restart, every occurrence has exactly one row."""
    for (cadence, _), sid in schedules.items():
        period = CADENCES[cadence][1]
        got = [
            int(str(sched))
            for (sched,) in _query(
                db,
                "SELECT scheduled_for FROM job_runs WHERE schedule_id = ? AND scheduled_for <= ?"
                " ORDER BY scheduled_for",
                (sid, restart),
            )
        ]
        first = next(occurrences_from(period, START))
        assert got == list(range(first, restart + 1, period))


async def test_downtime_matrix(autojump_clock: MockClock, tmp_path: Path) -> None:
    cells: dict[tuple[str, str, str], tuple[Counts, Counts]] = {}
    for name, downtime in DOWNTIMES.items():
        found = await run_downtime(tmp_path / f"down-{name}.db", downtime)
        cells.update({(name, cadence, policy): pair for (cadence, policy), pair in found.items()})
    table = [
        f"  {down:>4} {cadence:>8} {policy:>6}  expected {want.cell():>22}  observed {got.cell()}"
        for (down, cadence, policy), (want, got) in cells.items()
    ]
    print("downtime cells: delivered/late/missed rows/missed events/missed announced")
    print("\n".join(table))
    totals = Counter[str]()
    for want, got in cells.values():
        totals["equal"] += want == got
        totals["delivered"] += got.delivered
        totals["late"] += got.late
        totals["missed_rows"] += got.missed_rows
        totals["missed_events"] += got.missed_events
    publish(
        "downtime-matrix",
        cells=len(cells),
        equal=totals["equal"],
        delivered=totals["delivered"],
        late=totals["late"],
        missed_rows=totals["missed_rows"],
        missed_events=totals["missed_events"],
    )
    assert {cell: want for cell, (want, _) in cells.items()} == {
        cell: got for cell, (_, got) in cells.items()
    }
