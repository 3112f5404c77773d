"""Operator pages: tenants with counts, create a tenant (key and secret shown once), add a
user to a tenant; hidden (404) from everyone who is not an operator."""

from __future__ import annotations

from appliance.store.figures.tenants import tenant_summaries
from appliance.store.infra.database import Database
from appliance.store.invitations import pending_invitations
from appliance.store.users import Role, create_user, user_by_email
from tests.api.conftest import START
from tests.ui.conftest import _HASH, Browser, Tenant


async def test_an_operator_lists_and_creates_tenants_and_adds_users(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    db.write_now(
        create_user,
        email="ops@example.com",
        tenant_id=None,
        role=Role.OWNER,
        operator=True,
        password_hash=_HASH,
        now=START,
    )
    signed_in = await browser.sign_in("ops@example.com")
    assert signed_in.headers["Location"] == "/"
    landing = await browser.get("/")
    assert landing.status == 302 and landing.headers["Location"] == "/admin/tenants"
    listing = await browser.get("/admin/tenants")
    assert listing.status == 200 and "alpha" in listing.text and alpha.id in listing.text
    assert alpha.tenant.signing_secret not in listing.text
    assert alpha.tenant.api_key not in listing.text
    created = await browser.post("/admin/tenants", {"name": "gamma <x>"})
    assert created.status == 201 and "gamma &lt;x&gt;" in created.text
    assert "stk_" in created.text and "whsec_" in created.text
    names = {t.name for t in db.read_now(tenant_summaries, now=START)}
    assert names == {"alpha", "gamma <x>"}
    added = await browser.post(
        "/admin/users", {"tenant": "alpha", "email": "new@alpha.example", "role": "viewer"}
    )
    assert added.status == 201 and "/setup/" in added.text
    [invited] = db.read_now(pending_invitations, tenant_id=alpha.id, now=START)
    assert (invited.email, invited.role) == ("new@alpha.example", Role.VIEWER)
    assert db.read_now(user_by_email, email="new@alpha.example") is None  # made at setup
    assert (await browser.get("/schedules")).status == 403  # no tenant of its own


async def test_the_operator_pages_do_not_exist_for_tenant_users(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.owner)
    assert (await browser.get("/admin/tenants")).status == 404
    assert (await browser.post("/admin/tenants", {"name": "sneaky"})).status == 404
    assert "sneaky" not in {t.name for t in db.read_now(tenant_summaries, now=START)}
    assert "Tenants (operator)" not in (await browser.get("/")).text
