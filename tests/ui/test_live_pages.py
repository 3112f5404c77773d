"""The live marker the schedule page and the run page carry (appliance/ui/live_pages.py):
the UI stream from the newest event of the tenant's feed read with the page, the schedule
or run the page follows, and the regions a refresh swaps. The browser side is
tests/ui/test_browser_live.py."""

from __future__ import annotations

import re

from appliance.store.events import list_events
from appliance.store.infra.database import Database
from tests.ui.conftest import Browser, Tenant, schedule_form
from tests.ui.test_pages import location_id

MARKER = re.compile(r'<main id="main" data-live-stream="/events/stream\?after=(\d+)"')


def newest(db: Database, tenant_id: str) -> int:
    return db.read_now(list_events, tenant_id=tenant_id, limit=1000)[-1].seq


async def test_schedule_and_run_pages_carry_the_stream_from_their_own_snapshot(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    schedule_id = location_id(
        (await browser.post("/schedules/new", schedule_form())).headers["Location"]
    )
    shown = await browser.get(f"/schedules/{schedule_id}")
    found = MARKER.search(shown.text)
    assert found and int(found.group(1)) == newest(db, alpha.id)
    assert f'data-live-schedule="{schedule_id}"' in shown.text
    assert "data-live-run" not in shown.text
    assert "schedule.run.succeeded" in shown.text  # every type: the stream relays all
    for region in ("schedule-summary", "schedule-upcoming", "schedule-runs"):
        assert f'id="{region}" data-live-region' in shown.text

    await browser.post(f"/schedules/{schedule_id}/pause", {})  # a newer event
    run = await browser.post(f"/schedules/{schedule_id}/run", {})
    run_id = location_id(run.headers["Location"])
    page = await browser.get(f"/runs/{run_id}")
    moved = MARKER.search(page.text)
    assert moved and int(moved.group(1)) == newest(db, alpha.id) > int(found.group(1))
    assert f'data-live-run="{run_id}"' in page.text
    assert f'data-live-schedule="{schedule_id}"' in page.text
    for region in ("run-summary", "run-attempts"):
        assert f'id="{region}" data-live-region' in page.text


async def test_other_pages_follow_no_stream(browser: Browser, alpha: Tenant) -> None:
    await browser.sign_in(alpha.editor)
    for path in ("/", "/schedules", "/failed", "/events"):
        assert "data-live-stream" not in (await browser.get(path)).text
