"""The charts and the delivery inspector in real Chromium against an appliance process
and a real receiver: the dashboard's deliveries chart renders (bars with a height, the
stylesheet's colours) under an accessible name, the schedule page's strip links to a run,
the run page's "Copy curl command" copies the command, and axe finds no serious or
critical violation on the three pages, light and dark. Waits are Playwright's and the
receiver's; nothing sleeps."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, Receiver, create_tenant
from tests.ui.test_browser import (  # noqa: F401 (browser: the shared Chromium fixture)
    TIMEOUT_MS,
    add_user,
    axe_on,
    browser,
    sign_in,
)

pytestmark = pytest.mark.slow

OWNER = "owner@acme.example"


def test_the_dashboard_chart_renders_with_an_accessible_name(
    tmp_path: Path,
    browser: object,  # noqa: F811 (the fixture imported above)
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    tenant = create_tenant(data_dir, "acme")
    add_user(data_dir, OWNER, "acme", "owner")
    receiver = Receiver()
    app = Appliance(data_dir).start()
    context = browser.new_context(bypass_csp=True)  # our CSP refuses axe's injected script
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        with app.client(tenant["api_key"]) as api:
            body = {"name": "every second", "cron": "* * * * * *", "target_url": receiver.url}
            created = api.post(
                "/v1/schedules",
                json=body | {"payload": {"n": 1}, "headers": {"Authorization": "Bearer hush-42"}},
            )
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]
            receiver.wait_for(lambda ds: len(ds) >= 2)
            assert api.post(f"/v1/schedules/{schedule_id}/pause", json={}).status_code == 200
        sign_in(page, app.base_url, OWNER)
        chart = page.get_by_role("img", name=re.compile(r"^Deliveries per hour, last 24 hours"))
        deadline = time.monotonic() + 30  # the outcomes commit just after the answers
        while not chart.count() and time.monotonic() < deadline:
            page.reload()
        expect(chart).to_be_visible()
        expect(chart).to_have_attribute("aria-label", re.compile(r": [1-9]\d* succeeded"))
        bar = page.locator("#chart-deliveries rect.succeeded").first
        box = bar.bounding_box()
        assert box is not None and box["height"] > 10
        ok = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--ok')")
        fill = bar.evaluate("e => getComputedStyle(e).fill")
        assert ok.strip() == "#176b2c" and fill == "rgb(23, 107, 44)"  # charts.css, light
        expect(page.get_by_role("img", name=re.compile(r"^Lateness p50 and p95"))).to_be_visible()
        expect(page.locator("#deliveries-table")).to_be_attached()

        page.goto(f"{app.base_url}/schedules/{schedule_id}")
        cell = page.locator("#run-strip a.succeeded").first
        expect(cell).to_have_attribute("title", re.compile(r"^succeeded · 20"))
        # the sparkline sits under the strip at its own size, not centred in a page-wide box
        strip, spark = (page.locator(s).bounding_box() for s in ("#run-strip", "svg.sparkline"))
        assert strip and spark and spark["x"] == strip["x"] and spark["width"] <= 240, spark
        cell.click()
        expect(page.get_by_role("heading", level=1)).to_contain_text("Run of ")
        expect(page.locator("#request-headers")).to_contain_text("Authorization")
        expect(page.locator("body")).not_to_contain_text("hush-42")
        page.get_by_role("button", name="Copy curl command").click()
        expect(page.get_by_role("button", name="Copied")).to_be_visible()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.startswith("curl --request POST --url ") and "<masked>" in copied
        run_path = page.url.removeprefix(app.base_url)
        page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing of ours overflows
        for path, ids in (
            ("/", ["#chart-deliveries", "#chart-lateness"]),
            (f"/schedules/{schedule_id}", ["#run-strip", "#payload", "#retry-policy"]),
            (run_path, ["#request-headers", "#request-body", "#curl-command"]),
        ):
            page.goto(f"{app.base_url}{path}")
            for selector in ids:
                box = page.locator(selector).bounding_box()
                assert box is not None and box["x"] + box["width"] <= 390, (path, selector, box)
        page.set_viewport_size({"width": 1280, "height": 720})
        assert axe_on(page, app.base_url, ["/", f"/schedules/{schedule_id}", run_path]) == {}
    finally:
        context.close()
        app.kill()
        receiver.close()
