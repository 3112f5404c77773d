"""Security changes are in the live streams, not only the feed: API key issue and
revocation, secret rotation, expiry and reveal, notification URL changes (followed live
by ``GET /v1/events/stream`` and the web UI's ``/events/stream``), and a suspension and
resumption (which end a tenant's open streams: read back by a stream resumed after them).
Over real HTTP on loopback; each stream's ids are compared with the feed's."""

from __future__ import annotations

import httpx
import pytest
from quart_trio import QuartTrio

from appliance.core.events import Actor
from appliance.store.infra.database import Database
from appliance.store.secret_reveal import reveal_signing_secret
from appliance.store.suspension import resume_tenant, suspend_tenant
from appliance.store.tenants import list_signing_secrets
from tests.api.conftest import START, FakeClock, Nudges
from tests.api.loopback import Stream, open_stream, served
from tests.ui.conftest import Tenant, add_tenant, make_app, session_cookie

LIVE = [
    "api_key.created",
    "api_key.revoked",
    "signing_secret.rotated",
    "signing_secret.revoked",
    "signing_secret.revealed",
    "notifications.updated",
]
AFTER_SUSPENSION = ["tenant.suspended", "tenant.resumed"]


@pytest.fixture
def alpha(db: Database) -> Tenant:
    return add_tenant(db, "alpha")


@pytest.fixture
def app(db: Database, clock: FakeClock, nudges: Nudges) -> QuartTrio:
    return make_app(db, clock, nudges)


async def seqs_of(client: httpx.AsyncClient, key: dict[str, str], types: list[str]) -> list[int]:
    feed = await client.get("/v1/events", params={"type": types, "limit": "100"}, headers=key)
    assert feed.status_code == 200, feed.text
    return [item["seq"] for item in feed.json()["items"]]


async def change_keys_secrets_and_notifications(
    client: httpx.AsyncClient, key: dict[str, str], db: Database, tenant: Tenant
) -> None:
    issued = await client.post("/v1/keys", json={"name": "ci", "scope": "read"}, headers=key)
    assert issued.status_code == 201, issued.text
    revoked = await client.delete(f"/v1/keys/{issued.json()['id']}", headers=key)
    assert revoked.status_code == 204
    [first] = db.read_now(list_signing_secrets, tenant_id=tenant.id, now=START)
    rotated = await client.post("/v1/signing-secrets/rotate", json={}, headers=key)
    assert rotated.status_code == 201
    assert (await client.delete(f"/v1/signing-secrets/{first.id}", headers=key)).status_code == 200
    db.write_now(
        reveal_signing_secret, tenant_id=tenant.id, secret_id=rotated.json()["id"],
        now=START, actor=Actor.user("usr_owner"),
    )  # fmt: skip
    hook = {"url": "https://hooks.example.com/n"}
    assert (await client.put("/v1/notifications", json=hook, headers=key)).status_code == 200
    assert (await client.delete("/v1/notifications", headers=key)).status_code == 204


async def test_security_events_reach_both_streams(
    app: QuartTrio, db: Database, alpha: Tenant
) -> None:
    key = {"Authorization": f"Bearer {alpha.tenant.api_key}"}
    cookie = session_cookie(db, alpha.viewer)[1]
    async with served(app) as client:
        async with (
            open_stream(client, "/v1/events/stream", key) as api_stream,
            open_stream(client, "/events/stream", cookie) as ui_stream,
        ):
            assert isinstance(api_stream, Stream) and isinstance(ui_stream, Stream)
            await change_keys_secrets_and_notifications(client, key, db, alpha)
            live = await seqs_of(client, key, LIVE)
            assert len(live) == 7  # one each, and two notification changes: set, removed
            for stream in (api_stream, ui_stream):
                await stream.wait_for(lambda s: set(live) <= set(s.ids))
        newest = max(live)
        operator = Actor.user("usr_operator")
        db.write_now(suspend_tenant, tenant_id=alpha.id, now=START + 1, actor=operator)
        assert db.write_now(resume_tenant, tenant_id=alpha.id, now=START + 2, actor=operator)
        later = await seqs_of(client, key, AFTER_SUSPENSION)
        assert len(later) == 2
        cookie = session_cookie(db, alpha.viewer)[1]  # the suspension ended the session
        for path, headers in (("/v1/events/stream", key), ("/events/stream", cookie)):
            async with open_stream(client, f"{path}?after={newest}", headers) as resumed:
                assert isinstance(resumed, Stream)
                await resumed.wait_for(lambda s: set(later) <= set(s.ids))
