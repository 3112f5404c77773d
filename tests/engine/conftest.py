"""Engine test harness: virtual time, an inline database, a recording tenant endpoint.

Time: trio's ``MockClock(autojump_threshold=0)`` drives every sleep and deadline, and
``TrioWallClock`` derives wall time from it, so a day of firings runs in milliseconds;
``clock.jump()`` steps wall time alone, like a bad NTP correction. The database runs
inline (``threaded=False``): a worker-thread hop would let virtual time race ahead.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

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


@pytest.fixture
def autojump_clock() -> MockClock:
    return MockClock(autojump_threshold=0)


@pytest.fixture
def events_match_the_contracts(inline_db: Database) -> Iterator[None]:
    """After the test, every event the engine stored must validate against
    ``contracts/events`` (the public event contract). Every test with a ``tenant`` gets it."""
    yield
    for wire, validator in stored_events(inline_db):
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
def tenant(inline_db: Database, events_match_the_contracts: None) -> str:
    return inline_db.write_now(create_tenant, name="acme", now=T0).tenant_id


@pytest.fixture
def make_schedule(inline_db: Database, tenant: str) -> Callable[..., str]:
    def make(**fields: object) -> str:
        row = ScheduleRow(**fields)  # type: ignore[arg-type]
        return inline_db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)

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
