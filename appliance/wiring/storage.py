"""The store the settings choose, opened for the appliance or for one command.

- SQLite (the default): the data directory is made private (its modes tightened, with one
  log line), the appliance holds its lock file, and the file is opened beside it.
- PostgreSQL (``database = "postgresql://…"``): several replicas share one database, so
  there is no lock to hold, and nothing of the store lives in the data directory. The
  replicas share the database's clock (:class:`~appliance.clock.SharedClock`), measured
  here and followed while the appliance runs, and tell each other when work changed
  (``LISTEN/NOTIFY``, a hint: :mod:`appliance.store.infra.postgres.wakeups`). See
  docs/scale-out.md and docs/adr/0044-postgresql-store.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from appliance.clock import SharedClock, WallClock
from appliance.errors import StoreError
from appliance.settings.model import Settings
from appliance.store.infra.backend import Store, open_store
from appliance.store.infra.datadir import DIR_MODE, tighten_modes
from appliance.store.infra.lockfile import LockFile
from appliance.store.infra.postgres.urls import redacted

if TYPE_CHECKING:
    from appliance.store.infra.postgres.database import PgDatabase

log = logging.getLogger("steeple")

CLOCK_FOLLOW_S = 10.0  # how often a replica measures the database's clock again
CLOCK_STEP_MS = 1_000  # an offset that moves this much means this machine's clock stepped
CLOCK_READINGS = 3  # readings per measurement: the one with the shortest round trip counts
# A reading whose round trip took longer than this is refused: the offset assumes the
# database read its clock half-way through the round trip, so a round trip of seconds (a
# database restarting, this process paused or starved) would be an error of seconds.
CLOCK_MAX_ROUND_TRIP_MS = 250
CLOCK_START_MEASUREMENTS = 10  # at start, until one is trusted
CLOCK_START_PAUSE_S = 0.5


def open_configured_store(
    settings: Settings, *, migrate_schema: bool = True, check: bool = True
) -> Store:
    """Open (and migrate) the store ``settings`` name. Blocking: call at boot."""
    if settings.uses_postgres:  # needs the extra: open_store says so in one line
        return open_store(
            settings.database,
            migrate_schema=migrate_schema,
            pool_size=settings.database_pool_size,
        )
    secure_data_dir(settings)
    return open_store(settings.db_path, migrate_schema=migrate_schema, check=check)


def describe(settings: Settings) -> str:
    """The store for a log line or a command's notice (never a password)."""
    if settings.uses_postgres:
        return redacted(settings.database)
    return str(settings.db_path)


@contextmanager
def data_dir_lock(settings: Settings) -> Iterator[None]:
    """Hold the data directory's lock while the appliance runs on its SQLite file (one
    appliance per file); nothing to hold on PostgreSQL, where replicas share."""
    if settings.uses_postgres:
        yield
        return
    lock = LockFile(settings.lock_path)
    try:
        secure_data_dir(settings)
        lock.acquire()
    except OSError as exc:
        raise StoreError(
            f"cannot use the data directory {settings.data_dir} ({exc.strerror}): run"
            " Steeple as the user that owns it, or choose another with --data-dir"
        ) from None
    try:
        yield
    finally:
        lock.release()


def secure_data_dir(settings: Settings) -> None:
    """Create the data directory private, or take group and other permissions off it and
    its files, saying so once (docs/configuration.md, "The data directory")."""
    settings.data_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    changes = tighten_modes(settings.db_path)
    if changes:
        log.warning(
            "tightened the modes of the data directory (it holds signing secrets): %s",
            ", ".join(map(str, changes)),
        )


async def start_replica_services(
    nursery: trio.Nursery,
    settings: Settings,
    db: PgDatabase,
    clock: SharedClock,
    nudge: Callable[[], None],
) -> Callable[[], None]:
    """Start what a replica runs beside its engine (following the database's clock,
    announcing changes, listening for the others'); returns the nudge the API and UI call
    after a change: this replica's, also announced to the others."""
    await nursery.start(follow_database_clock, db, clock)
    announcing = Announcing(db, nudge)
    await nursery.start(announcing.run)
    if settings.database_listen:
        await nursery.start(listen_to_replicas, db, nudge)
    return announcing


class Announcing:
    """``nudge``, and a ``NOTIFY`` to the other replicas after it (several calls while one
    is sent make one more)."""

    def __init__(self, db: PgDatabase, nudge: Callable[[], None]) -> None:
        self._db = db
        self._nudge = nudge
        self._wanted = trio.Event()

    def __call__(self) -> None:
        self._nudge()
        self._wanted.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            await self._db.announce()


async def listen_to_replicas(
    db: PgDatabase,
    nudge: Callable[[], None],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Nudge this replica whenever another announces a change, until cancelled."""
    from appliance.store.infra.postgres.wakeups import listen

    stop = threading.Event()
    token = trio.lowlevel.current_trio_token()

    def woken() -> None:  # from the listening thread
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(nudge)

    task_status.started()
    try:
        await trio.to_thread.run_sync(listen, db.url, woken, stop, abandon_on_cancel=True)
    finally:
        stop.set()


@dataclass(frozen=True)
class OffsetReading:
    """The database's clock minus this machine's, in ms, and the round trip it took."""

    offset_ms: int
    round_trip_ms: int

    @property
    def trusted(self) -> bool:
        return self.round_trip_ms <= CLOCK_MAX_ROUND_TRIP_MS


def measure_offset(db: PgDatabase, clock: SharedClock) -> OffsetReading:
    """The best of :data:`CLOCK_READINGS` readings of the database's clock against this
    machine's (half the round trip allowed for): the one with the shortest round trip.
    Blocking: from the loop, run it in a thread."""
    return min((_read_offset(db, clock) for _ in range(CLOCK_READINGS)), key=_round_trip)


def _read_offset(db: PgDatabase, clock: SharedClock) -> OffsetReading:
    before = clock.base_ms()
    database_ms = db.database_now_ms()
    after = clock.base_ms()
    return OffsetReading(int(database_ms - (before + after) // 2), after - before)


def _round_trip(reading: OffsetReading) -> int:
    return reading.round_trip_ms


async def shared_clock(db: PgDatabase, clock: WallClock) -> SharedClock:
    """This replica's clock, corrected to the database's (docs/scale-out.md). A start
    while the database is slow to answer measures again, up to
    :data:`CLOCK_START_MEASUREMENTS` times, for a round trip short enough to trust, then
    takes the best it saw: following corrects it later."""
    shared = SharedClock(clock)
    readings = [await trio.to_thread.run_sync(measure_offset, db, shared)]
    while not readings[-1].trusted and len(readings) < CLOCK_START_MEASUREMENTS:
        await trio.sleep(CLOCK_START_PAUSE_S)
        readings.append(await trio.to_thread.run_sync(measure_offset, db, shared))
    best = min(readings, key=_round_trip)
    shared.offset_ms = best.offset_ms
    if not best.trusted:
        log.warning(
            "the database's clock took %d ms to read: this replica's offset from it may be"
            " off by half that until it is measured again",
            best.round_trip_ms,
        )
    if abs(shared.offset_ms) > CLOCK_STEP_MS:
        log.warning(
            "this machine's clock is %+d ms off the database's: following the database",
            -shared.offset_ms,
        )
    return shared


async def follow_database_clock(
    db: PgDatabase,
    clock: SharedClock,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Measure the offset again every :data:`CLOCK_FOLLOW_S`; a jump of more than
    :data:`CLOCK_STEP_MS` means this machine's clock stepped (the database's is the
    reference), and is logged. A database that cannot be reached, or a measurement whose
    round trips were all too long to trust, keeps the last offset."""
    task_status.started()
    while True:
        await trio.sleep(CLOCK_FOLLOW_S)
        try:
            reading = await trio.to_thread.run_sync(measure_offset, db, clock)
        except StoreError as exc:
            log.warning("could not read the database's clock: %s", exc)
            continue
        if not reading.trusted:
            log.info(
                "kept the clock offset: the database's clock took %d ms to read",
                reading.round_trip_ms,
            )
            continue
        if abs(reading.offset_ms - clock.offset_ms) > CLOCK_STEP_MS:
            log.warning(
                "this machine's clock stepped by %+d ms against the database's;"
                " following the database",
                clock.offset_ms - reading.offset_ms,
            )
        clock.offset_ms = reading.offset_ms
