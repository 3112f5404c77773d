"""The pages' layout in real Chromium against a real appliance process: cards of one
height, figures right-aligned, the current page marked (desktop), and at a phone's
390 px no page scrolls sideways, tables collapse to labelled rows and the live preview
sits above the submit button. Waits are Playwright's; nothing sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.harness import Action, Appliance, Receiver, create_tenant, steeple
from tests.ui.test_browser import PASSWORD, TIMEOUT_MS, add_user, browser, sign_in

__all__ = ["browser"]  # the module-scoped Chromium fixture, shared

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}
LONG_PATH = "/" + "a-very-long-path-segment-without-spaces" * 4 + "?token=" + "x" * 120


@dataclass
class Site:
    app: Appliance
    schedule_id: str
    run_id: str
    failed_run_id: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One tenant whose owner (also an operator) has a delivered run to a long URL and a
    failed one, so every list has a row."""
    data_dir = tmp_path_factory.mktemp("layout") / "data"
    tenant = create_tenant(data_dir, "acme")
    add_user(data_dir, "owner@acme.example", "acme", "owner")
    password_file = data_dir.parent / "ops.password"
    password_file.write_text(PASSWORD + "\n")
    made = steeple("admin", "create", "ops@example.com", "--password-file",
                   str(password_file), "--data-dir", str(data_dir))  # fmt: skip
    assert made.returncode == 0, made.stderr
    receiver = Receiver(respond=lambda d: Action(status=500 if b"fail" in d.body else 200))
    app = Appliance(data_dir).start()
    try:
        with app.client(tenant["api_key"]) as api:
            ids = []
            for name, payload in (("long url", {"ok": True}), ("always fails", {"fail": True})):
                body = {
                    "name": name,
                    "cron": "0 0 1 1 *",
                    "target_url": receiver.url + LONG_PATH,
                    "payload": payload,
                    "retry": {"max_attempts": 1},
                }
                created = api.post("/v1/schedules", json=body)
                assert created.status_code == 201, created.text
                ids.append(created.json()["id"])
            runs = [api.post(f"/v1/schedules/{i}/trigger").json()["id"] for i in ids]
            receiver.wait_for(lambda ds: len(ds) >= 2)
        yield Site(app=app, schedule_id=ids[0], run_id=runs[0], failed_run_id=runs[1])
    finally:
        app.kill()
        receiver.close()


def owner_pages(site: Site) -> list[str]:
    return [
        "/",
        "/schedules",
        "/schedules/new",
        f"/schedules/{site.schedule_id}",
        f"/schedules/{site.schedule_id}/edit",
        f"/runs/{site.run_id}",
        f"/runs/{site.failed_run_id}",
        "/failed",
        "/events",
        "/guide",
        "/settings/keys",
        "/settings/secrets",
        "/settings/users",
        "/settings/notifications",
        "/settings/account",
    ]


def new_page(browser: Any, **options: Any) -> Any:
    context = browser.new_context(**options)
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def test_cards_share_a_height_figures_align_and_the_current_page_is_marked(
    browser: Any, site: Site
) -> None:
    from playwright.sync_api import expect

    page = new_page(browser, viewport={"width": 1280, "height": 800})
    try:
        sign_in(page, site.app.base_url, "owner@acme.example")
        heights = page.eval_on_selector_all(
            ".tiles a", "cards => cards.map(c => c.getBoundingClientRect().height)"
        )
        assert len(heights) >= 3 and len(set(heights)) == 1, heights

        current = page.get_by_role("navigation").locator('[aria-current="page"]')
        expect(current).to_have_text("Dashboard")
        weights = page.eval_on_selector_all(
            "nav a", "links => links.map(a => getComputedStyle(a).fontWeight)"
        )
        assert weights[0] != weights[1], weights  # the marked entry looks different

        page.goto(f"{site.app.base_url}/schedules/{site.schedule_id}")
        expect(page.locator("td.num").first).to_be_visible()
        aligned = page.eval_on_selector_all(
            "th.num, td.num", "cells => cells.map(c => getComputedStyle(c).textAlign)"
        )
        assert aligned and set(aligned) == {"right"}, aligned
    finally:
        page.context.close()
