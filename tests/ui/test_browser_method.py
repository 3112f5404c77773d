"""The schedule form's "Method" in real Chromium (docs/schedules.md, "HTTP methods"):
choosing GET hides the payload, a GET schedule is created from the form and delivered to
a real receiver with an empty body, and the schedule page shows the method.

Waits are Playwright's auto-waiting assertions and the receiver's condition waits.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, Receiver, create_tenant
from tests.ui.test_browser import (  # noqa: F401 (browser: a shared fixture)
    TIMEOUT_MS,
    add_user,
    browser,
    sign_in,
)

pytestmark = pytest.mark.slow


def test_choosing_get_hides_the_payload_and_delivers_no_body(
    tmp_path: Path,
    browser: object,  # noqa: F811 (the fixture imported above)
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    create_tenant(data_dir, "acme")
    add_user(data_dir, "ed@acme.example", "acme", "editor")
    receiver = Receiver()
    app = Appliance(data_dir).start()
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        sign_in(page, app.base_url, "ed@acme.example")
        page.goto(f"{app.base_url}/schedules/new")
        payload = page.get_by_role("textbox", name="Payload", exact=True)
        expect(payload).to_be_visible()
        page.get_by_label("Name").fill("rollup")
        page.get_by_role("textbox", name="Cron", exact=True).fill("0 3 1 1 *")
        page.get_by_label("Target URL").fill(receiver.url)
        page.get_by_label("Method").select_option("GET")
        expect(payload).to_be_hidden()
        page.get_by_label("Method").select_option("PUT")
        expect(payload).to_be_visible()
        page.get_by_label("Method").select_option("GET")
        page.get_by_role("button", name="Create schedule").click()
        expect(page.get_by_role("status")).to_have_text("Schedule created.")
        expect(page.locator("#schedule-method")).to_have_text("GET")
        page.get_by_role("button", name="Run now").click()
        receiver.wait_for(lambda ds: len(ds) >= 1)
    finally:
        context.close()
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        receiver.close()
    (delivery,) = receiver.snapshot()
    assert (delivery.method, delivery.body) == ("GET", b"")
    assert "content-type" not in delivery.headers
