"""/settings/secrets: an owner reveals an active signing secret whole, once, on the
answer to a CSRF-checked POST that records ``signing_secret.revealed`` naming the owner;
anyone else is refused and nothing is recorded. Replaced secrets show their overlap
counting down."""

from __future__ import annotations

from quart_trio import QuartTrio

from appliance.core.events import Actor, EventType
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.tenants import list_signing_secrets
from appliance.store.users import user_by_email
from tests.api.conftest import START, FakeClock
from tests.ui.conftest import Browser, Tenant


def reveals(db: Database, tenant_id: str) -> list[tuple[dict[str, object], Actor | None]]:
    return [
        (dict(e.data), e.actor)
        for e in db.read_now(list_events, tenant_id=tenant_id)
        if e.type is EventType.SECRET_REVEALED
    ]


async def test_an_owner_reveals_a_secret_once_and_the_reveal_is_an_event(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.owner)
    await browser.post("/settings/secrets/rotate", {"overlap_seconds": "3600"})
    newest, older = db.read_now(list_signing_secrets, tenant_id=alpha.id, now=START)
    listing = await browser.get("/settings/secrets")
    assert older.secret not in listing.text and newest.secret not in listing.text
    assert f'action="/settings/secrets/{older.id}/reveal"' in listing.text
    assert f'data-countdown="{START + 3_600_000}">1 h 0 s</span>' in listing.text

    refused = await browser.post(f"/settings/secrets/{older.id}/reveal", {}, csrf=False)
    assert refused.status == 403 and older.secret not in refused.text
    assert reveals(db, alpha.id) == []

    shown = await browser.post(f"/settings/secrets/{older.id}/reveal", {})
    assert shown.status == 200
    assert f'<code id="revealed-secret">{older.secret}</code>' in shown.text
    assert newest.secret not in shown.text  # only the one asked for
    assert shown.headers["Cache-Control"] == "no-store"
    owner = db.read_now(user_by_email, email=alpha.owner)
    assert owner is not None
    assert reveals(db, alpha.id) == [
        ({"secret_id": older.id, "masked": older.masked}, Actor.user(owner.id))
    ]
    again = await browser.get("/settings/secrets")
    assert older.secret not in again.text  # once: the next page masks it again
    events = await browser.get("/events")
    assert "signing_secret.revealed" in events.text and older.secret not in events.text


async def test_editors_viewers_other_tenants_and_expired_secrets_reveal_nothing(
    app: QuartTrio, alpha: Tenant, beta: Tenant, db: Database, clock: FakeClock
) -> None:
    owner = Browser(app)
    await owner.sign_in(alpha.owner)
    await owner.post("/settings/secrets/rotate", {"overlap_seconds": "60"})
    newest, older = db.read_now(list_signing_secrets, tenant_id=alpha.id, now=START)
    for email in (alpha.editor, alpha.viewer):
        member = Browser(app)
        await member.sign_in(email)
        answer = await member.post(f"/settings/secrets/{newest.id}/reveal", {})
        assert answer.status == 403 and newest.secret not in answer.text, email
    stranger = Browser(app)
    await stranger.sign_in(beta.owner)
    foreign = await stranger.post(f"/settings/secrets/{newest.id}/reveal", {})
    assert foreign.status == 404 and newest.secret not in foreign.text
    clock.advance(61_000)  # the older secret's overlap is over: it signs nothing now
    expired = await owner.post(f"/settings/secrets/{older.id}/reveal", {})
    assert expired.status == 404 and older.secret not in expired.text
    assert reveals(db, alpha.id) == [] and reveals(db, beta.id) == []
