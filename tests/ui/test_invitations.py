"""An owner cannot tell whether an email has an account in another tenant: inviting it
answers exactly as inviting a fresh address, and its setup link fails closed without
touching the existing account (docs/ui.md, "People and sign-in")."""

from __future__ import annotations

import re

from quart_trio import QuartTrio

from appliance.store.infra.database import Database
from appliance.store.invitations import pending_invitations
from appliance.store.users import Role, user_by_email
from tests.api.conftest import START
from tests.ui.conftest import PASSWORD, Browser, Page, Tenant, add_tenant

LINK = re.compile(r"/setup/([A-Za-z0-9_-]+)")
USER_ID = re.compile(r"usr_[0-9A-Z]{26}")  # each tenant's own users' ids, in their forms
NEW_PASSWORD = "a different horse battery"


def token_of(page: Page) -> str:
    found = LINK.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def normalised(page: Page, *, email: str, tenant: str, csrf: str) -> tuple[int, str]:
    text = USER_ID.sub("USR", page.text.replace(token_of(page), "TOKEN").replace(csrf, "CSRF"))
    return page.status, text.replace(email, "EMAIL").replace(tenant, "TENANT")


async def invite(app: QuartTrio, owner: str, email: str) -> tuple[Page, Browser]:
    browser = Browser(app)
    await browser.sign_in(owner)
    await browser.get("/settings/users")
    page = await browser.post("/settings/users", {"email": email, "role": "editor"})
    return page, browser


async def test_inviting_an_email_of_another_tenant_answers_as_a_fresh_one(
    app: QuartTrio, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    gamma = add_tenant(db, "gamma")
    taken = alpha.editor  # has an account in alpha
    before = db.read_now(user_by_email, email=taken)
    fresh_page, fresh_browser = await invite(app, beta.owner, "fresh@elsewhere.example")
    taken_page, taken_browser = await invite(app, gamma.owner, taken)
    assert fresh_page.status == taken_page.status == 201
    assert normalised(
        fresh_page, email="fresh@elsewhere.example", tenant="beta", csrf=fresh_browser.csrf
    ) == normalised(taken_page, email=taken, tenant="gamma", csrf=taken_browser.csrf)
    # Both are pending invitations of their tenant, listed alike.
    [pending] = db.read_now(pending_invitations, tenant_id=gamma.id, now=START)
    assert (pending.email, pending.role) == (taken, Role.EDITOR)
    assert db.read_now(user_by_email, email=taken) == before


async def test_the_link_of_a_taken_email_fails_closed_and_changes_no_account(
    app: QuartTrio, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    taken = alpha.editor
    before = db.read_now(user_by_email, email=taken)
    page, _ = await invite(app, beta.owner, taken)
    fresh, _ = await invite(app, beta.owner, "fresh@beta.example")
    invitee = Browser(app)
    forms = [
        await invitee.get(f"/setup/{token}") for token in (token_of(page), token_of(fresh))
    ]  # the form reads alike for both
    assert [f.status for f in forms] == [200, 200] and "Set your password" in forms[0].text
    assert forms[0].text.replace(taken, "EMAIL").replace(token_of(page), "TOKEN") == forms[
        1
    ].text.replace("fresh@beta.example", "EMAIL").replace(token_of(fresh), "TOKEN")
    chosen = {"password": NEW_PASSWORD, "repeat": NEW_PASSWORD}
    refused = await invitee.post(f"/setup/{token_of(page)}", chosen)
    assert refused.status == 404 and "unknown, used or expired" in refused.text
    assert db.read_now(user_by_email, email=taken) == before  # tenant, role, password kept
    assert (await Browser(app).sign_in(taken, NEW_PASSWORD)).status == 401
    assert (await Browser(app).sign_in(taken, PASSWORD)).status == 302
    made = await invitee.post(f"/setup/{token_of(fresh)}", chosen)
    assert made.status == 302
    user = db.read_now(user_by_email, email="fresh@beta.example")
    assert user is not None and (user.tenant_id, user.role) == (beta.id, Role.EDITOR)
    assert (await invitee.post(f"/setup/{token_of(fresh)}", chosen)).status == 404


async def test_an_email_of_the_owners_own_tenant_is_refused(
    app: QuartTrio, alpha: Tenant, db: Database
) -> None:
    page, _ = await invite(app, alpha.owner, alpha.viewer.upper())
    assert page.status == 409 and "a user of this tenant already" in page.text
    assert db.read_now(pending_invitations, tenant_id=alpha.id, now=START) == []
