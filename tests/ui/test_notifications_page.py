"""``/settings/notifications``: an owner sets, replaces and removes the failure-notification
URL with the API's validation (the outbound policy and the destination check), each
change a ``notifications.updated`` event naming the owner; a refused URL is shown beside
its field with the text as typed, and nothing changes; the forms need the CSRF token and
the owner's role."""

from __future__ import annotations

import pytest

from appliance.core.events import Actor, EventType
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.notifications import get_target
from appliance.store.users import user_by_email
from tests.engine.conftest import stored_events
from tests.ui.conftest import Browser, Tenant

HOOK = "https://hooks.example.com/T0/B1/secret-token"
PAGE = "/settings/notifications"


def changes(db: Database, tenant: Tenant) -> list[tuple[Actor | None, object]]:
    return [
        (e.actor, e.data)
        for e in db.read_now(list_events, tenant_id=tenant.id, limit=100)
        if e.type is EventType.NOTIFICATIONS_UPDATED
    ]


async def test_an_owner_sets_replaces_and_removes_the_url(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    owner = db.read_now(user_by_email, email=alpha.owner)
    assert owner is not None
    me = Actor.user(owner.id)
    await browser.sign_in(alpha.owner)
    empty = await browser.get(PAGE)
    assert empty.status == 200 and "No notification URL is set" in empty.text
    assert 'href="/settings/notifications"' in empty.text  # in the navigation
    assert "Remove the URL" not in empty.text

    done = await browser.post(PAGE, {"url": f"  {HOOK} "})
    assert (done.status, done.headers["Location"]) == (302, f"{PAGE}?done=set")
    assert db.read_now(get_target, tenant_id=alpha.id) == HOOK
    shown = await browser.get(done.headers["Location"])
    assert "Notification URL set" in shown.text and f"<code>{HOOK}</code>" in shown.text
    assert f'value="{HOOK}"' in shown.text and "Remove the URL" in shown.text

    same = await browser.post(PAGE, {"url": HOOK})
    assert same.headers["Location"] == f"{PAGE}?done=unchanged"
    other = "https://hooks.example.com:8443/other"
    assert (await browser.post(PAGE, {"url": other})).headers["Location"] == f"{PAGE}?done=replaced"
    assert db.read_now(get_target, tenant_id=alpha.id) == other
    gone = await browser.post(f"{PAGE}/remove", {})
    assert gone.headers["Location"] == f"{PAGE}?done=removed"
    assert db.read_now(get_target, tenant_id=alpha.id) is None
    again = await browser.post(f"{PAGE}/remove", {})
    assert again.headers["Location"] == f"{PAGE}?done=none"

    assert changes(db, alpha) == [
        (me, {"change": "set", "origin": "https://hooks.example.com:443"}),
        (me, {"change": "replaced", "origin": "https://hooks.example.com:8443"}),
        (me, {"change": "removed", "origin": "https://hooks.example.com:8443"}),
    ]
    feed = await browser.get("/events")
    assert "notifications.updated" in feed.text and "secret-token" not in feed.text
    for wire, validator in stored_events(db):
        assert [e.message for e in validator.iter_errors(wire)] == [], wire


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "must be an http:// or https:// URL"),
        ("ftp://hooks.example.com/x", "http"),
        ("https://hooks.example.com/" + "x" * 2048, "at most 2048 characters"),
        ("http://127.0.0.1/hook", "127.0.0.1"),  # loopback: refused before any lookup
        ("https://intranet.example.com/hook", "public address"),  # resolves to 10.1.2.3
        ("https://nowhere.example.com/hook", "nowhere.example.com"),  # does not resolve
    ],
)
async def test_a_refused_url_is_shown_beside_its_field_and_changes_nothing(
    browser: Browser, alpha: Tenant, db: Database, url: str, says: str
) -> None:
    await browser.sign_in(alpha.owner)
    await browser.post(PAGE, {"url": HOOK})
    refused = await browser.post(PAGE, {"url": url})
    assert refused.status == 422, refused.text
    assert 'id="notification-url-error"' in refused.text, refused.text[-1500:]
    assert says in refused.text, refused.text[-1500:]
    assert 'aria-invalid="true"' in refused.text and "The URL was not saved" in refused.text
    if len(url) < 100:
        assert f'value="{url}"' in refused.text  # as typed, to correct it
    assert db.read_now(get_target, tenant_id=alpha.id) == HOOK
    assert [data for _, data in changes(db, alpha)] == [
        {"change": "set", "origin": "https://hooks.example.com:443"}
    ]


async def test_the_forms_need_the_csrf_token_and_an_owner(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.owner)
    await browser.get(PAGE)
    assert (await browser.post(PAGE, {"url": HOOK}, csrf=False)).status == 403
    assert (await browser.post(f"{PAGE}/remove", {}, csrf=False)).status == 403
    editor = Browser(browser.app)
    await editor.sign_in(alpha.editor)
    assert (await editor.get(PAGE)).status == 403
    assert (await editor.post(PAGE, {"url": HOOK})).status == 403
    assert db.read_now(get_target, tenant_id=alpha.id) is None
    assert changes(db, alpha) == []
