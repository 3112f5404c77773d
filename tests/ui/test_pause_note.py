"""Pausing with a note in the web UI, one schedule or the selected ones: the note goes
through the API's ``parse_note`` into the ``schedule.paused`` event and is shown on the
schedule page while it stays paused; a note too long is an inline error and nothing is
paused."""

from __future__ import annotations

from appliance.core.events import EventType
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.pauses import MAX_NOTE_CHARS
from appliance.store.schedules import get_schedule
from tests.ui.conftest import Browser, Tenant, schedule_form
from tests.ui.test_pages import location_id


def pause_notes(db: Database, tenant_id: str) -> list[object]:
    events = db.read_now(list_events, tenant_id=tenant_id)
    return [e.data.get("note") for e in events if e.type is EventType.SCHEDULE_PAUSED]


def is_paused(db: Database, tenant_id: str, schedule_id: str) -> bool:
    schedule = db.read_now(get_schedule, tenant_id=tenant_id, schedule_id=schedule_id)
    assert schedule is not None
    return schedule.spec.paused


async def create(browser: Browser, key: str = "k") -> str:
    created = await browser.post("/schedules/new", schedule_form(form_key=key * 43))
    return location_id(created.headers["Location"])


async def test_a_pause_note_is_recorded_and_shown_while_paused(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    schedule_id = await create(browser)
    page = await browser.get(f"/schedules/{schedule_id}")
    assert '<label for="note">Pause note' in page.text
    done = await browser.post(
        f"/schedules/{schedule_id}/pause", {"note": "  <b>db</b> move until Friday  "}
    )
    assert done.status == 302 and is_paused(db, alpha.id, schedule_id)
    assert pause_notes(db, alpha.id) == ["<b>db</b> move until Friday"]
    shown = await browser.get(f"/schedules/{schedule_id}")
    assert '<dd id="pause-note">&lt;b&gt;db&lt;/b&gt; move until Friday</dd>' in shown.text
    await browser.post(f"/schedules/{schedule_id}/resume", {})
    assert 'id="pause-note"' not in (await browser.get(f"/schedules/{schedule_id}")).text
    await browser.post(f"/schedules/{schedule_id}/pause", {"note": "   "})  # blank: no note
    assert pause_notes(db, alpha.id) == ["<b>db</b> move until Friday", None]
    assert 'id="pause-note"' not in (await browser.get(f"/schedules/{schedule_id}")).text


async def test_a_note_too_long_is_an_inline_error_and_nothing_is_paused(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    schedule_id = await create(browser)
    long_note = "x" * (MAX_NOTE_CHARS + 1)
    refused = await browser.post(f"/schedules/{schedule_id}/pause", {"note": long_note})
    assert refused.status == 422
    assert 'id="note-error"' in refused.text and "at most 500" in refused.text
    assert 'aria-describedby="note-error"' in refused.text
    assert f'value="{long_note}"' in refused.text  # kept to be shortened
    assert not is_paused(db, alpha.id, schedule_id) and pause_notes(db, alpha.id) == []


async def test_selected_schedules_pause_with_one_note_or_not_at_all(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    ids = [await create(browser, key) for key in "ab"]
    listing = await browser.get("/schedules")
    assert '<label for="bulk-note">Pause note' in listing.text
    too_long = "y" * (MAX_NOTE_CHARS + 1)
    refused = await browser.post(
        "/schedules/selected?back=/schedules",
        {"schedule": ids, "action": "pause", "note": too_long},
    )
    assert refused.status == 422 and 'id="note-error"' in refused.text
    assert f'value="{too_long}"' in refused.text
    assert refused.text.count('value="sch_') == 2 and refused.text.count(" checked ") == 2
    assert not any(is_paused(db, alpha.id, i) for i in ids)
    done = await browser.post(
        "/schedules/selected?back=/schedules",
        {"schedule": ids, "action": "pause", "note": "quarter close"},
    )
    assert done.status == 302 and all(is_paused(db, alpha.id, i) for i in ids)
    assert pause_notes(db, alpha.id) == ["quarter close", "quarter close"]
    for schedule_id in ids:
        page = await browser.get(f"/schedules/{schedule_id}")
        assert '<dd id="pause-note">quarter close</dd>' in page.text
    resumed = await browser.post(  # a resume ignores the note field
        "/schedules/selected", {"schedule": ids, "action": "resume", "note": too_long}
    )
    assert resumed.status == 302 and not any(is_paused(db, alpha.id, i) for i in ids)
