"""The pages at a phone's width (390 × 844) in real Chromium against a real appliance
process: no page scrolls sideways (long URLs, ids and keys wrap or scroll in their own
box), tables collapse to labelled rows, and the live preview sits above the submit
button. The site (a delivered run to a long URL, a failed run) is test_browser_layout's.
The pages are shot at this width for docs/ui.md (``*-phone-light.png``, ``*-phone-dark.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.ui.test_browser import PASSWORD, screenshots, shoot, sign_in
from tests.ui.test_browser_layout import Site, browser, new_page, owner_pages, site

__all__ = ["browser", "screenshots", "site"]  # the shared module-scoped fixtures

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}


# The pages docs/ui.md shows at a phone's width, by the name of their screenshot.
PHONE_SHOTS = {
    "/": "dashboard",
    "/schedules": "schedules",
    "/schedules/new": "schedule-new",
    "/schedules/{schedule_id}": "schedule",
    "/runs/{run_id}": "run",
    "/failed": "failed",
    "/events": "events",
}


def test_at_390_px_no_page_scrolls_sideways_and_tables_become_rows(
    browser: Any, site: Site, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    page = new_page(browser, viewport=PHONE, is_mobile=True, has_touch=True)
    base = site.app.base_url
    try:
        page.goto(f"{base}/login")
        wide = {"/login": page.evaluate("document.documentElement.scrollWidth")}
        sign_in(page, base, "owner@acme.example")
        shots = {template.format(**vars(site)): name for template, name in PHONE_SHOTS.items()}
        for path in owner_pages(site):
            page.goto(f"{base}{path}")
            wide[path] = page.evaluate("document.documentElement.scrollWidth")
            if path in shots:
                page.wait_for_load_state("networkidle")  # the live preview in, then shot
                shoot(page, f"{shots.pop(path)}-phone", screenshots)
        assert shots == {}  # every phone shot is of a page the width check visits
        page.get_by_role("button", name="Sign out").click()
        page.goto(f"{base}/login")
        page.get_by_label("Email").fill("ops@example.com")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Tenants")).to_be_visible()
        for path in ("/admin/tenants", "/admin/health"):
            page.goto(f"{base}{path}")
            wide[path] = page.evaluate("document.documentElement.scrollWidth")
        too_wide = {path: width for path, width in wide.items() if width > PHONE["width"]}
        assert too_wide == {}, too_wide
    finally:
        page.context.close()


def test_at_390_px_rows_are_labelled_and_the_preview_is_above_the_submit_button(
    browser: Any, site: Site
) -> None:
    from playwright.sync_api import expect

    page = new_page(browser, viewport=PHONE, is_mobile=True, has_touch=True)
    base = site.app.base_url
    try:
        sign_in(page, base, "owner@acme.example")
        page.goto(f"{base}/failed")
        cell = page.locator("tbody tr").first.locator("td").nth(1)
        expect(cell).to_have_attribute("data-label", "Schedule")
        shown = cell.evaluate(
            "c => [getComputedStyle(c).display, getComputedStyle(c, '::before').content]"
        )
        assert shown == ["block", '"Schedule"'], shown
        header = page.locator("thead").first
        assert header.evaluate("h => h.getBoundingClientRect().height") <= 1  # hidden

        page.goto(f"{base}/schedules/new")
        expect(page.locator("#preview").get_by_role("table")).to_be_visible()
        preview = page.locator("#preview").bounding_box()
        submit = page.get_by_role("button", name="Create schedule").bounding_box()
        assert preview is not None and submit is not None
        assert preview["y"] + preview["height"] <= submit["y"], (preview, submit)
    finally:
        page.context.close()
