"""axe-core on the pages a POST answers with, and the fragments pages swap in, reached
in real Chromium as a user does (a refused sign-in, the setup form's error, the schedule
form's field errors, the live and full preview, the feed's new-events link, a key or
secret shown once, user changes, the account's errors, a refused notification URL, the
operator's new tenant and setup link). test_browser_axe.py's ANSWER_PAGES names them;
the test fails unless it checked exactly those."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui.test_browser import browser
from tests.ui.test_browser_axe import (
    ANSWER_PAGES,
    OWNER,
    REFUSED_URL,
    ROLES,
    SPARE,
    Site,
    axe_here,
    create_schedule,
    page_as,
    site,
)

__all__ = ["browser", "site"]  # the shared module-scoped fixtures


@pytest.mark.slow
def test_pages_that_answer_a_post_pass_axe(browser: Any, site: Site) -> None:
    """Each page a POST answers with (or a fragment swapped in), reached as a user does."""
    checked: dict[str, dict[str, list[str]]] = {}
    pages = {role: page_as(browser, site, role) for role in ROLES}
    try:
        for role, flow in (
            ("signed out", _signed_out_answers),
            ("editor", _editor_answers),
            ("owner", _owner_answers),
            ("operator", _operator_answers),
        ):
            for endpoint in flow(pages[role], site):
                checked[endpoint] = axe_here(pages[role])
    finally:
        for page in pages.values():
            page.context.close()
    assert {e: v for e, v in checked.items() if v} == {}
    assert set(checked) == set(ANSWER_PAGES)


def _signed_out_answers(page: Any, site: Site) -> Iterator[str]:
    from playwright.sync_api import expect

    page.goto(f"{site.app.base_url}/login")
    page.get_by_label("Email").fill(OWNER)
    page.get_by_label("Password").fill("not the password at all")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    yield "ui.login"
    page.goto(f"{site.app.base_url}/{site.path('setup/{setup_token}')}")
    page.get_by_label("Password", exact=True).fill("a long enough password")
    page.get_by_label("Repeat password").fill("another long password")
    page.get_by_role("button", name="Set password").click()
    expect(page.get_by_text("the two passwords differ")).to_be_visible()
    yield "ui.setup"


def _editor_answers(page: Any, site: Site) -> Iterator[str]:
    from playwright.sync_api import expect

    base = site.app.base_url
    page.goto(f"{base}/schedules/new")
    page.get_by_label("Name").fill("refused")
    page.get_by_role("radio", name="Cron").check()
    page.get_by_role("textbox", name="Cron", exact=True).fill("0 3 * * *")
    page.get_by_label("Target URL").fill(REFUSED_URL)
    expect(page.locator("#preview").get_by_role("table")).to_be_visible()
    expect(page.locator("#preview")).to_contain_text("169.254.169.254")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview").get_by_role("table")).to_be_visible()
    yield "ui.preview_page"
    page.get_by_role("button", name="Create schedule").click()
    expect(page.locator(".field-error").first).to_be_visible()
    yield "ui.create"
    page.goto(f"{base}/{site.path('schedules/{schedule_id}/edit')}")
    page.get_by_label("Target URL").fill(REFUSED_URL)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".field-error").first).to_be_visible()
    yield "ui.save"
    page.goto(f"{base}/events")
    expect(page.locator("#new-events")).to_have_attribute("data-mode", re.compile("stream|poll"))
    with site.app.client(site.api_key) as api:
        url = api.get(f"/v1/schedules/{site.schedule_id}").json()["target_url"]
        create_schedule(api, "made meanwhile", url, {})  # a schedule.created event
    expect(page.get_by_role("link", name=re.compile(r"new events?: show"))).to_be_visible()
    yield "ui.new_events"


def _owner_answers(page: Any, site: Site) -> Iterator[str]:
    from playwright.sync_api import expect

    base = site.app.base_url
    page.goto(f"{base}/settings/keys")
    page.get_by_label("Key name").fill("ci")
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("#new-key")).to_be_visible()
    yield "ui.create_key"
    page.goto(f"{base}/settings/secrets")
    page.get_by_label(re.compile("Overlap")).fill("60")
    page.get_by_role("button", name="Rotate secret").click()
    expect(page.locator("#new-secret")).to_be_visible()
    yield "ui.rotate"
    page.get_by_role("button", name=re.compile("^Reveal ")).first.click()
    expect(page.locator("#revealed-secret")).to_be_visible()
    yield "ui.reveal"
    page.goto(f"{base}/settings/users")
    page.get_by_label("Email").fill("pat@acme.example")
    page.get_by_role("button", name="Add user").click()
    expect(page.locator("#setup-link")).to_be_visible()
    yield "ui.add_user"
    page.get_by_label(f"Role of {SPARE}", exact=True).select_option("editor")
    page.get_by_role("button", name=f"Change role of {SPARE}").click()
    expect(page.get_by_role("status")).to_contain_text(f"Role of {SPARE} changed.")
    yield "ui.set_role"
    page.get_by_role("button", name=f"New setup link for {SPARE}").click()
    expect(page.locator("#setup-link")).to_be_visible()
    yield "ui.reset"
    page.get_by_role("link", name=f"Remove {SPARE}…").click()
    page.get_by_role("button", name=f"Remove {SPARE}").click()
    expect(page.get_by_role("status")).to_contain_text(f"{SPARE} removed")
    yield "ui.remove"
    page.goto(f"{base}/settings/account")
    page.get_by_label("Current password").fill("not the password at all")
    page.get_by_label("New password", exact=True).fill("a new horse battery staple")
    page.get_by_label("Repeat the new password").fill("a new horse battery staple")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator(".field-error, [role=alert]").first).to_be_visible()
    yield "ui.new_password"
    page.get_by_role("button", name="End my other sessions").click()
    expect(page.get_by_role("status")).to_be_visible()
    yield "ui.end_sessions"
    page.goto(f"{base}/settings/notifications")
    page.get_by_label("Notification URL").fill(REFUSED_URL)
    page.get_by_role("button", name="Save URL").click()
    expect(page.get_by_role("alert")).to_contain_text("The URL was not saved")
    yield "ui.save_notifications"


def _operator_answers(page: Any, site: Site) -> Iterator[str]:
    from playwright.sync_api import expect

    page.goto(f"{site.app.base_url}/admin/tenants")
    page.get_by_label("Tenant name").fill("beta")
    page.get_by_role("button", name="Create tenant").click()
    expect(page.locator("#new-tenant-id")).to_be_visible()
    yield "ui.add_tenant"
    page.get_by_label("Tenant (id or name)").fill("beta")
    page.get_by_label("Email").fill("bo@beta.example")
    page.get_by_role("button", name="Add user").click()
    expect(page.locator("#setup-link")).to_be_visible()
    yield "ui.add_tenant_user"
