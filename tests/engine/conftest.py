"""Engine test harness: virtual time, the database, a recording tenant endpoint.

Time: trio's ``MockClock(autojump_threshold=0)`` drives every sleep and deadline, and
``TrioWallClock`` derives wall time from it, so a day of firings runs in milliseconds;
``clock.jump()`` steps wall time alone, like a bad NTP correction.

The database (``engine_db``) runs inline (``threaded=False``); the modules of
:data:`THREADED_TOO` run each test a second time on the threaded database with group
commit, as production writes (docs/adr/0033-claim-queue-scheduling.md, "Storage"). A
task waiting on a worker thread counts as blocked, so autojump would let virtual time
race ahead while SQLite works: there, virtual time stands still while any worker thread
runs (:func:`hold_virtual_time_in_threads`), which is what the inline database gives.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import jsonschema
import pytest
import referencing
import trio
from trio.testing import MockClock

from appliance.api.events import render_event
from appliance.clock import TrioWallClock, WallClock
from appliance.engine.assembly import Engine, EngineConfig, build_engine
from appliance.engine.delivery import Exchange
from appliance.engine.dispatcher import DispatchConfig, RenewLeases
from appliance.store.claims import renew_leases as store_renew_leases
from appliance.store.events import events_after
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.engine.fake_exchange import Endpoint, Received, reply
from tests.store.conftest import T0, ScheduleRow, insert_schedule
from tests.test_event_schemas import SCHEMAS

__all__ = ["Endpoint", "Received", "reply"]  # the fake endpoint, for every engine test


T = TypeVar("T")

# The modules whose tests also run on the threaded database: the dispatcher's claims,
# completions and leases, and the planner beside them. The others (delivery wire tests,
# notifier, leadership, templates…) exercise nothing group commit changes, and stay
# inline to keep the suite's time.
THREADED_TOO = frozenset(
    {
        "test_dispatcher",
        "test_dispatcher_batches",
        "test_fairness",
        "test_reaper",
        "test_breaker",
        "test_planner",
        "test_resend_delivery",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Both databases for :data:`THREADED_TOO`, but for tests choosing their own
    (``parametrize("engine_db", …, indirect=True)``)."""
    test = metafunc.definition
    chosen = any("engine_db" in str(m.args[0]) for m in test.iter_markers("parametrize"))
    if "engine_db" not in metafunc.fixturenames or chosen:
        return
    if metafunc.module.__name__.rsplit(".", 1)[-1] in THREADED_TOO:
        metafunc.parametrize("engine_db", ["inline", "threaded"], indirect=True)


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


@pytest.fixture
def engine_db(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Database]:
    """The engine's database file: inline, or threaded with group commit (see above)."""
    threaded = getattr(request, "param", "inline") == "threaded"
    database = Database.open(tmp_path / "steeple.db", threaded=threaded)
    if threaded and "autojump_clock" in request.fixturenames:
        hold_virtual_time_in_threads(request.getfixturevalue("autojump_clock"), monkeypatch)
    yield database
    database.close()


def hold_virtual_time_in_threads(clock: MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop autojump while any ``trio.to_thread.run_sync`` call is out: SQLite's work
    takes no virtual time, as on the inline database, yet runs in its worker thread and
    lets the other tasks run meanwhile (so writes queue and are group-committed)."""
    real_run_sync = trio.to_thread.run_sync
    out = 0

    async def run_sync(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        nonlocal out
        out += 1
        clock.autojump_threshold = math.inf
        try:
            return await real_run_sync(fn, *args, **kw)
        finally:
            out -= 1
            if not out:
                clock.autojump_threshold = 0

    monkeypatch.setattr(trio.to_thread, "run_sync", run_sync)


@pytest.fixture
def events_match_the_contracts(engine_db: Database) -> Iterator[None]:
    """After the test, every event the engine stored must validate against
    ``contracts/events`` (the public event contract). Every test with a ``tenant`` gets it."""
    yield
    for wire, validator in stored_events(engine_db):
        problems = [error.message for error in validator.iter_errors(wire)]
        assert problems == [], wire


def stored_events(db: Database) -> list[tuple[dict[str, Any], Any]]:
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.Resource.from_contents(schema)) for schema in SCHEMAS.values()
    )
    validators = {
        name: jsonschema.Draft202012Validator(schema, registry=registry)
        for name, schema in SCHEMAS.items()
    }

    events = db.read_now(events_after, after=0, limit=1_000_000)
    return [(render_event(event), validators[str(event.type)]) for event in events]


@pytest.fixture
def wall() -> TrioWallClock:
    """Wall time derived from trio's clock. Async tests must request ``autojump_clock``
    themselves: pytest-trio only looks at the test function's own arguments."""
    return TrioWallClock(T0)


@pytest.fixture
def tenant(engine_db: Database, events_match_the_contracts: None) -> str:
    return engine_db.write_now(create_tenant, name="acme", now=T0).tenant_id


@pytest.fixture
def make_schedule(engine_db: Database, tenant: str) -> Callable[..., str]:
    def make(**fields: object) -> str:
        row = ScheduleRow(**fields)  # type: ignore[arg-type]
        return engine_db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)

    return make


@asynccontextmanager
async def running_engine(
    db: Database,
    wall: WallClock,
    endpoint: Exchange,
    *,
    dispatch: DispatchConfig | None = None,
    renew_leases: RenewLeases = store_renew_leases,
    incarnation_id: str | None = None,
) -> AsyncIterator[Engine]:
    """The engine as ``runtime`` builds it (:func:`build_engine`: planner, dispatcher with
    heartbeat, reaper) delivering to ``endpoint`` — the fake (``Endpoint``) or the real
    delivery client — running in a nursery; cancelled on exit."""
    async with trio.open_nursery() as nursery:
        if incarnation_id is None:
            incarnation_id = await db.write(register_incarnation, pid=1, now=wall.now_ms())
        engine = build_engine(
            db=db,
            clock=wall,
            client=endpoint,
            incarnation_id=incarnation_id,
            config=EngineConfig(dispatch=dispatch or DispatchConfig(user_agent="Steeple/test")),
            rand=random.Random(7),
            renew_leases=renew_leases,
        )
        await nursery.start(engine.run)
        yield engine
        nursery.cancel_scope.cancel()
