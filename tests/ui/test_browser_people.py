"""Managing people in real Chromium (issue 22, "People"): an owner changes a user's role
and removes them on ``/settings/users``, whose other browser is signed out at once; the
last owner's demotion is refused on the page; the users and account pages pass axe.

Waits are Playwright's auto-waiting assertions; nothing sleeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, create_tenant
from tests.ui.test_browser import (  # noqa: F401 (browser, screenshots: shared fixtures)
    TIMEOUT_MS,
    add_user,
    axe_on,
    browser,
    screenshots,
    shoot,
    sign_in,
)

pytestmark = pytest.mark.slow


def test_an_owner_changes_a_role_removes_a_user_and_keeps_the_last_owner(
    tmp_path: Path,
    browser: object,  # noqa: F811 (the fixtures imported above)
    screenshots: Path,  # noqa: F811
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    create_tenant(data_dir, "acme")
    add_user(data_dir, "owner@acme.example", "acme", "owner")
    add_user(data_dir, "eve@acme.example", "acme", "editor")
    app = Appliance(data_dir).start()
    owner = browser.new_context(bypass_csp=True)  # our CSP refuses axe's injected script
    editor = browser.new_context()
    for context in (owner, editor):
        context.set_default_timeout(TIMEOUT_MS)
    page, theirs = owner.new_page(), editor.new_page()
    try:
        sign_in(theirs, app.base_url, "eve@acme.example")
        sign_in(page, app.base_url, "owner@acme.example")
        page.get_by_role("link", name="Users").click()
        expect(page.get_by_role("heading", name="Users")).to_be_visible()
        page.get_by_label("Role of eve@acme.example", exact=True).select_option("viewer")
        page.get_by_role("button", name="Change role of eve@acme.example").click()
        expect(page.get_by_role("status")).to_contain_text("Role of eve@acme.example changed.")
        expect(page.get_by_label("Role of eve@acme.example", exact=True)).to_have_value("viewer")
        shoot(page, "users", screenshots)
        page.get_by_label("Role of owner@acme.example", exact=True).select_option("editor")
        page.get_by_role("button", name="Change role of owner@acme.example").click()
        expect(page.get_by_role("alert")).to_contain_text(
            "owner@acme.example is the last owner of this tenant"
        )
        expect(page.get_by_label("Role of owner@acme.example", exact=True)).to_have_value("owner")
        page.get_by_role("link", name="Remove eve@acme.example…").click()
        expect(page.get_by_role("heading", name="Remove this user?")).to_be_visible()
        theirs.goto(f"{app.base_url}/schedules")  # asking removed nothing yet
        expect(theirs.get_by_role("heading", name="Schedules")).to_be_visible()
        page.get_by_role("button", name="Remove eve@acme.example").click()
        expect(page.get_by_role("status")).to_contain_text("eve@acme.example removed")
        expect(page.get_by_label("Role of eve@acme.example", exact=True)).to_have_count(0)
        theirs.goto(f"{app.base_url}/schedules")
        expect(theirs.get_by_role("heading", name="Sign in")).to_be_visible()
        page.get_by_role("link", name="Account").click()
        expect(page.get_by_role("heading", name="Your account")).to_be_visible()
        expect(page.locator("#password-rule")).to_contain_text("12 to 1024 characters")
        violations = axe_on(page, app.base_url, ["/settings/users", "/settings/account"])
        assert violations == {}, json.dumps(violations, indent=1)
    finally:
        owner.close()
        editor.close()
        app.kill()
