"""The notifications page in real Chromium against an appliance process: reached from the
navigation, a refused URL (cloud metadata, which no outbound policy allows) is shown
beside its field with the text kept and nothing saved; a public URL is saved and shown;
the change is on ``/events`` naming the owner by email (the id in its title); axe finds
no serious or critical violation. And a key's revocation asks first, as a schedule's
deletion does. Waits are Playwright's; nothing sleeps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, create_tenant
from tests.ui.test_browser import (  # noqa: F401 (browser: the shared Chromium fixture)
    TIMEOUT_MS,
    add_user,
    axe_on,
    browser,
    screenshots,
    shoot,
    sign_in,
)

pytestmark = pytest.mark.slow

OWNER = "owner@acme.example"
REFUSED = "http://169.254.169.254/hook"  # cloud metadata: refused whatever is allowed
PUBLIC = "https://93.184.216.34/steeple-failures"  # a public literal: nothing to resolve


def test_an_owner_sets_the_notification_url_in_the_browser(
    tmp_path: Path,
    browser: object,  # noqa: F811 (the fixture imported above)
    screenshots: Path,  # noqa: F811
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    create_tenant(data_dir, "acme")
    add_user(data_dir, OWNER, "acme", "owner")
    app = Appliance(data_dir).start()
    context = browser.new_context(bypass_csp=True)  # our CSP refuses axe's injected script
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        sign_in(page, app.base_url, OWNER)
        page.get_by_role("navigation", name="Main").get_by_role(
            "link", name="Notifications"
        ).click()
        expect(page.get_by_role("heading", name="Failure notifications")).to_be_visible()
        expect(page.locator("#current")).to_contain_text("No notification URL is set")

        field = page.get_by_label("Notification URL")
        field.fill(REFUSED)
        page.get_by_role("button", name="Save URL").click()
        expect(page.locator("#notification-url-error")).to_contain_text("169.254.169.254")
        expect(page.get_by_role("alert")).to_contain_text("The URL was not saved")
        expect(field).to_have_value(REFUSED)
        expect(field).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#current")).to_contain_text("No notification URL is set")
        shoot(page, "notifications-refused", screenshots)

        field.fill(PUBLIC)
        page.get_by_role("button", name="Save URL").click()
        expect(page.locator("p.notice")).to_contain_text("Notification URL set")
        expect(page.locator("#current")).to_contain_text(PUBLIC)
        expect(page.get_by_role("button", name="Remove the URL")).to_be_visible()
        shoot(page, "notifications", screenshots)

        page.goto(f"{app.base_url}/events")
        row = page.get_by_role("row").filter(has_text="notifications.updated")
        expect(row).to_have_count(1)
        actor = row.locator(".actor")
        expect(actor).to_have_text(OWNER)
        expect(actor).to_have_attribute("title", re.compile(r"^user usr_[0-9A-Z]{26}$"))
        assert axe_on(page, app.base_url, ["/settings/notifications", "/events"]) == {}
    finally:
        context.close()
        app.kill()


def test_revoking_a_key_asks_first_in_the_browser(
    tmp_path: Path,
    browser: object,  # noqa: F811 (the fixture imported above)
) -> None:
    """ "Revoke…" opens a confirmation naming the key (the key still works meanwhile);
    "Keep it" leaves it; the confirmation's button revokes it, and /events names the
    owner by email for both the issue and the revocation."""
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    create_tenant(data_dir, "acme")
    add_user(data_dir, OWNER, "acme", "owner")
    app = Appliance(data_dir).start()
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        sign_in(page, app.base_url, OWNER)
        page.goto(f"{app.base_url}/settings/keys")
        page.get_by_label("Key name").fill("deploy")
        page.get_by_role("button", name="Create key").click()
        expect(page.locator("#new-key")).to_be_visible()
        page.get_by_role("link", name="Revoke deploy").click()
        expect(page.get_by_role("heading", name="Revoke this API key?")).to_be_visible()
        page.get_by_role("link", name="Keep it").click()
        expect(page.get_by_role("cell", name="deploy", exact=True)).to_be_visible()
        page.get_by_role("link", name="Revoke deploy").click()
        page.get_by_role("button", name="Revoke “deploy”").click()
        expect(page.locator("p.notice")).to_contain_text("Key revoked.")
        expect(page.get_by_role("cell", name="deploy", exact=True)).to_have_count(0)
        page.goto(f"{app.base_url}/events")
        for type in ("api_key.created", "api_key.revoked"):
            row = page.get_by_role("row").filter(has_text=type)
            expect(row.locator(".actor")).to_have_text(OWNER)
    finally:
        context.close()
        app.kill()
