"""A replica's offset from the database's clock (appliance/wiring/storage.py): the reading with
the shortest round trip counts, and a measurement whose round trips were all long (a
database restarting, the replica paused) is not trusted, so the offset it would give is
never followed.

The database here is a fake of ours: it answers its clock at a set point of each round
trip and moves this machine's clock by the round trip it is told to take.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import trio
import trio.testing

from appliance.clock import SharedClock
from appliance.store.infra.postgres.database import PgDatabase
from appliance.wiring import storage

OFFSET_MS = 5_000  # the database's clock is this far ahead of this machine's


class MachineClock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def now_ms(self) -> int:
        return self.ms


class ScriptedDatabase:
    """Each read of the clock takes the next round trip of ``trips``; the database reads
    its clock at the end of a trip (a server that answers as soon as it is back up).
    ``after_script`` runs when a read asks for more than the script holds."""

    def __init__(self, machine: MachineClock, trips: list[int], after_script: Callable[[], None]):
        self.machine = machine
        self.trips = list(trips)
        self.after_script = after_script
        self.offsets_seen: list[int] = []
        self.clock: SharedClock | None = None

    def database_now_ms(self) -> int:
        if self.clock is not None:
            self.offsets_seen.append(self.clock.offset_ms)
        if not self.trips:
            self.after_script()
            return self.machine.ms + OFFSET_MS
        self.machine.ms += self.trips.pop(0)
        return self.machine.ms + OFFSET_MS


def scripted(trips: list[int], after_script: Callable[[], None] = lambda: None):
    machine = MachineClock()
    db = ScriptedDatabase(machine, trips, after_script)
    clock = SharedClock(machine)
    return db, clock


def test_the_reading_with_the_shortest_round_trip_counts() -> None:
    db, clock = scripted([3_000, 2, 40])
    reading = storage.measure_offset(cast(PgDatabase, db), clock)
    assert reading.round_trip_ms == 2 and reading.trusted
    assert reading.offset_ms == OFFSET_MS + 1  # half of 2 ms allowed for


def test_a_measurement_of_slow_round_trips_is_not_trusted() -> None:
    db, clock = scripted([4_000, 3_000, 5_000])
    reading = storage.measure_offset(cast(PgDatabase, db), clock)
    assert reading.round_trip_ms == 3_000 and not reading.trusted
    assert reading.offset_ms == OFFSET_MS + 1_500  # what trusting it would have cost


async def test_following_keeps_the_offset_through_slow_round_trips(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.CancelScope() as scope:
        token = trio.lowlevel.current_trio_token()
        db, clock = scripted(
            [4_000, 3_000, 5_000, 2, 2, 2],  # a database restarting, then answering
            after_script=lambda: token.run_sync_soon(scope.cancel),
        )
        db.clock = clock
        clock.offset_ms = OFFSET_MS
        await storage.follow_database_clock(cast(PgDatabase, db), clock)
    # all along, including while the restart's slow readings were taken, the offset
    # stayed within the trusted readings' error; never the 1.5 s a slow one would cost
    assert len(db.offsets_seen) == 9  # three measurements of three readings
    assert all(abs(seen - OFFSET_MS) <= 1 for seen in [*db.offsets_seen, clock.offset_ms])
    assert OFFSET_MS + 1 in db.offsets_seen  # the trusted measurement was followed


async def test_a_start_while_the_database_is_slow_measures_again(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    monkeypatch.setattr(storage, "CLOCK_START_PAUSE_S", 0.0)
    db, _ = scripted([4_000, 3_000, 5_000, 600, 2, 900])
    shared = await storage.shared_clock(cast(PgDatabase, db), db.machine)
    assert shared.offset_ms == OFFSET_MS + 1
    assert db.trips == []  # it measured twice: the first was not trusted
