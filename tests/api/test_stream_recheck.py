"""An open live stream ends within its recheck interval once its credential stops working
— an API key revoked, a UI session ended, the tenant suspended — over real HTTP on
loopback, and what the tenant's feed records afterwards never reaches it. On SQLite, and
on PostgreSQL with ``STEEPLE_TEST_DATABASE=postgresql``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from quart_trio import QuartTrio

from appliance.core.events import EventType
from appliance.live.limits import StreamRegistry, Surface
from appliance.store.api_keys import Scope, insert_api_key
from appliance.store.events import append_event
from appliance.store.infra.database import Database
from appliance.store.sessions import end_session, find_session
from appliance.store.suspension import suspend_tenant
from tests.api.conftest import START, FakeClock, Nudges, schedule_json
from tests.api.loopback import Stream, open_stream, served
from tests.ui.conftest import Tenant, add_tenant, make_app, session_cookie

RECHECK_S = 0.1  # the test app's interval: an ended credential is noticed within it
ENDS_WITHIN_S = 5  # the deadline each test gives the stream to end


@pytest.fixture
def registry() -> StreamRegistry:
    return StreamRegistry(recheck_s=RECHECK_S)


@pytest.fixture
def app(db: Database, clock: FakeClock, nudges: Nudges, registry: StreamRegistry) -> QuartTrio:
    return make_app(db, clock, nudges, streams=registry)


@pytest.fixture
def alpha(db: Database) -> Tenant:
    return add_tenant(db, "alpha")


def read_key(db: Database, tenant: Tenant) -> tuple[str, str]:
    """A read key of ``tenant``: (its id, the key)."""
    issued = db.write_now(
        insert_api_key, tenant_id=tenant.id, name="r", scope=Scope.READ, now=START
    )
    return issued.key.id, issued.api_key


@asynccontextmanager
async def streaming(
    client: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> AsyncIterator[Stream]:
    async with open_stream(client, path, headers) as stream:
        assert isinstance(stream, Stream), stream.text
        yield stream


async def create_schedule(client: httpx.AsyncClient, key: str) -> int:
    """A schedule created through the API: the ``seq`` of its ``schedule.created``."""
    created = await client.post(
        "/v1/schedules", json=schedule_json(), headers={"Authorization": f"Bearer {key}"}
    )
    assert created.status_code == 201, created.text
    feed = await client.get(
        "/v1/events",
        params={"type": "schedule.created", "schedule_id": created.json()["id"]},
        headers={"Authorization": f"Bearer {key}"},
    )
    (event,) = feed.json()["items"]
    return int(event["seq"])


async def ends(stream: Stream) -> None:
    await stream.wait_for(lambda s: s.ended.is_set(), ENDS_WITHIN_S)
    assert stream.clean_end, "the stream was cut off instead of ended"


async def test_a_revoked_key_s_open_stream_ends_and_receives_nothing_more(
    app: QuartTrio, db: Database, alpha: Tenant, registry: StreamRegistry
) -> None:
    key_id, key = read_key(db, alpha)
    owner = alpha.tenant.api_key  # a write key: it revokes the read key and writes on
    async with (
        served(app) as client,
        streaming(client, "/v1/events/stream", {"Authorization": f"Bearer {key}"}) as doomed,
        streaming(client, "/v1/events/stream", {"Authorization": f"Bearer {owner}"}) as witness,
    ):
        before = await create_schedule(client, owner)
        await doomed.wait_for(lambda s: before in s.ids)
        revoked = await client.delete(
            f"/v1/keys/{key_id}", headers={"Authorization": f"Bearer {owner}"}
        )
        assert revoked.status_code == 204, revoked.text
        await ends(doomed)
        after = await create_schedule(client, owner)
        await witness.wait_for(lambda s: after in s.ids)  # fanned out to the tenant's streams
        assert after not in doomed.ids
        assert registry.open_streams()[Surface.API] == 1  # the ended stream's slot is back
        assert not witness.ended.is_set()


async def test_a_suspended_tenant_s_open_streams_end_api_and_ui(
    app: QuartTrio, db: Database, alpha: Tenant, registry: StreamRegistry
) -> None:
    _, ui_session = session_cookie(db, alpha.viewer)
    bearer = {"Authorization": f"Bearer {alpha.tenant.api_key}"}
    async with (
        served(app) as client,
        streaming(client, "/v1/events/stream", bearer) as api_stream,
        streaming(client, "/events/stream", ui_session) as ui_stream,
    ):
        await db.write(suspend_tenant, tenant_id=alpha.id, now=START + 1)
        await ends(api_stream)
        await ends(ui_stream)
        later = await db.write(
            append_event, tenant_id=alpha.id, type=EventType.SCHEDULE_DELETED, now=START + 2
        )
        assert later not in api_stream.ids + ui_stream.ids
        assert registry.open_streams() == {Surface.API: 0, Surface.UI: 0}


async def test_an_ended_session_s_open_stream_ends(
    app: QuartTrio, db: Database, alpha: Tenant, clock: FakeClock
) -> None:
    token, cookie = session_cookie(db, alpha.viewer)
    _, other_cookie = session_cookie(db, alpha.viewer)  # the same user elsewhere: unaffected
    async with (
        served(app) as client,
        streaming(client, "/events/stream", cookie) as signed_out,
        streaming(client, "/events/stream", other_cookie) as elsewhere,
    ):
        session = await db.read(find_session, token=token, now=clock.now)
        assert session is not None
        await db.write(end_session, id_hash=session.id_hash, now=clock.now)
        await ends(signed_out)
        later = await create_schedule(client, alpha.tenant.api_key)
        await elsewhere.wait_for(lambda s: later in s.ids)
        assert later not in signed_out.ids
