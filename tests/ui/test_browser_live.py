"""The schedule page and the run page follow runs as they happen, in real Chromium against
an appliance process and a real receiver: no reload (a value set on ``window`` survives),
and two tabs share one stream (the second is relayed the first's events). Waits are
Playwright's auto-waiting assertions and the receiver's condition wait; nothing sleeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import Action, Appliance, Receiver, create_tenant
from tests.ui.test_browser import (  # noqa: F401 (browser: the shared Chromium fixture)
    TIMEOUT_MS,
    add_user,
    browser,
    sign_in,
)

pytestmark = pytest.mark.slow

NOT_RELOADED = "window.steepleNotReloaded"


def test_a_run_shows_up_on_its_schedule_page_and_its_run_page_without_a_reload(
    browser: object,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    tenant = create_tenant(data_dir, "acme")
    add_user(data_dir, "viewer@acme.example", "acme", "viewer")
    receiver = Receiver(respond=lambda _d: Action(delay_s=60))  # answers 200 on release()
    app = Appliance(data_dir).start()
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        with app.client(tenant["api_key"]) as api:
            body = {"name": "live", "cron": "0 0 1 1 *", "target_url": receiver.url}
            created = api.post("/v1/schedules", json=body | {"payload": {}})
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]

        schedule_tab = context.new_page()
        sign_in(schedule_tab, app.base_url, "viewer@acme.example")
        schedule_tab.goto(f"{app.base_url}/schedules/{schedule_id}")
        expect(schedule_tab.locator("main")).to_have_attribute(
            "data-live-mode", "stream", timeout=TIMEOUT_MS
        )
        expect(schedule_tab.locator("#schedule-runs")).to_contain_text("No runs yet.")
        schedule_tab.evaluate(f"{NOT_RELOADED} = true")

        with app.client(tenant["api_key"]) as api:
            run = api.post(f"/v1/schedules/{schedule_id}/trigger")
            assert run.status_code == 201, run.text
            run_id = run.json()["id"]
        receiver.wait_for(lambda ds: len(ds) == 1)  # in flight, held until release()

        run_tab = context.new_page()  # the same browser: the first tab's stream, relayed
        run_tab.goto(f"{app.base_url}/runs/{run_id}")
        expect(run_tab.locator("main")).to_have_attribute(
            "data-live-mode", "relay", timeout=TIMEOUT_MS
        )
        expect(run_tab.locator("#run-summary .badge")).to_have_text("running")
        run_tab.evaluate(f"{NOT_RELOADED} = true")
        schedule_link = run_tab.locator("#run-summary").get_by_role("link", name="live")
        schedule_link.focus()  # a keyboard user's place, kept across the swap

        receiver.release()
        expect(run_tab.locator("#run-summary .badge")).to_have_text("succeeded", timeout=TIMEOUT_MS)
        expect(run_tab.locator("#run-attempts")).to_contain_text("HTTP 200", timeout=TIMEOUT_MS)
        expect(schedule_link).to_be_focused()
        rows = schedule_tab.locator("#schedule-runs tbody tr")
        expect(rows).to_have_count(1, timeout=TIMEOUT_MS)
        expect(rows.first.locator(".badge")).to_have_text("succeeded", timeout=TIMEOUT_MS)
        expect(rows.first.get_by_role("link")).to_have_attribute("href", f"/runs/{run_id}")
        # swapped rows are labelled for a phone's width like the page's own
        expect(rows.first.locator("td").nth(1)).to_have_attribute("data-label", "State")
        assert schedule_tab.evaluate(NOT_RELOADED) is True
        assert run_tab.evaluate(NOT_RELOADED) is True
        schedule_tab.close(run_before_unload=True)  # its lease ends: the run tab takes over
        expect(run_tab.locator("main")).to_have_attribute(
            "data-live-mode", "stream", timeout=TIMEOUT_MS
        )

        # a browser without EventSource: the pages stay as loaded, the feed polls, no error
        bare = browser.new_context()
        bare.add_init_script("delete window.EventSource")
        errors: list[str] = []
        tab = bare.new_page()
        tab.on("pageerror", lambda error: errors.append(str(error)))
        sign_in(tab, app.base_url, "viewer@acme.example")
        tab.goto(f"{app.base_url}/schedules/{schedule_id}")
        expect(tab.locator("#schedule-runs tbody tr")).to_have_count(1)
        tab.goto(f"{app.base_url}/events")
        expect(tab.locator("#new-events")).to_have_attribute("data-mode", "poll")
        assert tab.evaluate("typeof EventSource") == "undefined"
        assert errors == []
        bare.close()
    finally:
        context.close()
        app.kill()
        receiver.close()
