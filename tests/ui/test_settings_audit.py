"""An owner's key, secret and user changes on the settings pages are events in the
tenant's feed naming the owner (the events page shows them), never carrying a key, a
secret or a setup token; revoking a key takes a confirmation page first."""

from __future__ import annotations

import json
import re

from appliance.core.events import Actor, EventType
from appliance.store.api_keys import list_api_keys
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.users import user_by_email
from tests.engine.conftest import stored_events
from tests.ui.conftest import Browser, Tenant

NEW_KEY = re.compile(r'id="new-key">([^<]+)<')
NEW_SECRET = re.compile(r"(whsec_[A-Za-z0-9+/=_-]{20,})")
LINK = re.compile(r"/setup/([A-Za-z0-9_-]+)")
PASSWORD = "a brand new horse battery"


# Sign-ins are events too (tests/ui/test_sign_in_events.py); these tests follow the changes.
SIGN_INS = {EventType.USER_SIGNED_IN, EventType.USER_SIGN_IN_FAILED}


def events_of(db: Database, tenant: Tenant) -> list[dict[str, object]]:
    return [
        {"type": str(e.type), "actor": e.actor, "data": e.data}
        for e in db.read_now(list_events, tenant_id=tenant.id, limit=100)
        if e.type not in SIGN_INS
    ]


async def owner_id(db: Database, tenant: Tenant) -> str:
    user = db.read_now(user_by_email, email=tenant.owner)
    assert user is not None
    return user.id


async def test_revoking_a_key_asks_first_and_each_change_is_an_event(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    me = Actor.user(await owner_id(db, alpha))
    await browser.sign_in(alpha.owner)
    issued = await browser.post("/settings/keys", {"name": "deploy", "scope": "write"})
    found = NEW_KEY.search(issued.text)
    assert issued.status == 201 and found is not None
    key = next(k for k in db.read_now(list_api_keys, tenant_id=alpha.id) if k.name == "deploy")
    listing = await browser.get("/settings/keys")
    assert f'href="/settings/keys/{key.id}/revoke"' in listing.text
    confirm = await browser.get(f"/settings/keys/{key.id}/revoke")
    assert confirm.status == 200 and "Revoke this API key?" in confirm.text
    assert "deploy" in confirm.text and key.id in {
        k.id for k in db.read_now(list_api_keys, tenant_id=alpha.id)
    }
    done = await browser.post(f"/settings/keys/{key.id}/revoke", {})
    assert done.status == 302
    assert key.id not in {k.id for k in db.read_now(list_api_keys, tenant_id=alpha.id)}
    assert (await browser.get(f"/settings/keys/{key.id}/revoke")).status == 404  # gone
    rotated = await browser.post("/settings/secrets/rotate", {"overlap_seconds": "0"})
    secret = NEW_SECRET.search(rotated.text)
    assert rotated.status == 201 and secret is not None
    invited = await browser.post(
        "/settings/users", {"email": "new@alpha.example", "role": "viewer"}
    )
    link = LINK.search(invited.text)
    assert invited.status == 201 and link is not None
    events = events_of(db, alpha)
    assert [(e["type"], e["actor"]) for e in events] == [
        ("api_key.created", me),
        ("api_key.revoked", me),
        ("signing_secret.rotated", me),
        ("user.invited", me),
    ]
    assert events[0]["data"] == {"key_id": key.id, "name": "deploy", "scope": "write"}
    text = json.dumps([e["data"] for e in events])
    for value in (found.group(1), secret.group(1), link.group(1), alpha.tenant.signing_secret):
        assert value not in text
    feed = await browser.get("/events")
    assert "api_key.revoked" in feed.text and "user.invited" in feed.text
    assert found.group(1) not in feed.text and secret.group(1) not in feed.text
    for wire, validator in stored_events(db):
        assert [e.message for e in validator.iter_errors(wire)] == [], wire


async def test_using_an_invitation_is_user_created_by_the_new_user(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.owner)
    invited = await browser.post(
        "/settings/users", {"email": "new@alpha.example", "role": "editor"}
    )
    link = LINK.search(invited.text)
    assert link is not None
    chosen = {"password": PASSWORD, "repeat": PASSWORD}
    invitee = Browser(browser.app)
    await invitee.get(f"/setup/{link.group(1)}")  # the form and its pre-session token
    made = await invitee.post(f"/setup/{link.group(1)}", chosen)
    assert made.status == 302
    user = db.read_now(user_by_email, email="new@alpha.example")
    assert user is not None
    [_, created] = events_of(db, alpha)
    assert created == {
        "type": "user.created",
        "actor": Actor.user(user.id),
        "data": {"user_id": user.id, "email": "new@alpha.example", "role": "editor"},
    }
    assert PASSWORD not in json.dumps(created["data"])


async def test_the_confirmation_is_the_owners_only(
    browser: Browser, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    [key] = db.read_now(list_api_keys, tenant_id=beta.id)
    await browser.sign_in(alpha.owner)
    assert (await browser.get(f"/settings/keys/{key.id}/revoke")).status == 404  # beta's
    editor = Browser(browser.app)
    await editor.sign_in(alpha.editor)
    [mine] = db.read_now(list_api_keys, tenant_id=alpha.id)
    assert (await editor.get(f"/settings/keys/{mine.id}/revoke")).status == 403
    assert events_of(db, alpha) == []
