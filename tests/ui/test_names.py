"""Names, not ids: runs are shown by their schedule's name on the run page, the failed
runs list, the events feed and the dashboard, with the ids still there (a title, a Copy
id button) for a support ticket; another tenant's schedule is never named."""

from __future__ import annotations

import re

from appliance.store.infra.database import Database
from appliance.store.schedules import get_schedule
from appliance.store.usecases.pages import schedule_names
from tests.api.conftest import START, FakeClock, deliver_due, plan_runs
from tests.ui.conftest import Browser, Tenant, add_tenant, schedule_form


async def failed_run(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> tuple[str, str]:
    await browser.sign_in(alpha.editor)
    created = await browser.post(
        "/schedules/new", schedule_form(name="nightly report", cron="* * * * * *")
    )
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert schedule is not None
    plan_runs(db, schedule, after=START, count=1)
    clock.advance(5000)
    (run_id,) = deliver_due(db, now=clock.now, status=410)
    clock.advance(1000)
    return schedule_id, run_id


def linked_names(html: str, prefix: str) -> list[tuple[str, str]]:
    """(title, text) of every link to ``/{prefix}/…`` (run or schedule pages)."""
    return re.findall(rf'<a href="/{prefix}/[^"]+" title="([^"]+)">(?:<time[^>]*>)?([^<]+)<', html)


async def test_lists_name_the_schedule_and_keep_the_ids_in_titles(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    schedule_id, run_id = await failed_run(browser, alpha, db, clock)
    for path in ("/failed", "/", "/events"):
        page = await browser.get(path)
        assert page.status == 200, path
        assert (schedule_id, "nightly report") in linked_names(page.text, "schedules"), path
        assert f">{schedule_id}</a>" not in page.text, path  # no id shown as the name
    for path in ("/failed", "/"):
        runs = linked_names((await browser.get(path)).text, "runs")
        assert [title for title, _ in runs] == [run_id], path
        assert runs[0][1] != run_id, path  # the run reads as its occurrence, not its id


async def test_the_run_page_names_its_schedule_and_offers_both_ids_to_copy(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    schedule_id, run_id = await failed_run(browser, alpha, db, clock)
    page = await browser.get(f"/runs/{run_id}")
    assert re.search(r"<h1>Run of nightly report <span", page.text)
    assert f'<code id="run-id">{run_id}</code>' in page.text
    assert f'<code id="schedule-id">{schedule_id}</code>' in page.text
    assert 'data-copy="run-id"' in page.text and 'data-copy="schedule-id"' in page.text
    await browser.post(f"/schedules/{schedule_id}/delete", {})
    gone = await browser.get(f"/runs/{run_id}")
    assert "<h1>Run of nightly report" in gone.text  # by the name it had


async def test_another_tenants_schedule_is_never_named(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    schedule_id, _ = await failed_run(browser, alpha, db, clock)
    beta = add_tenant(db, "beta")
    mine = db.read_now(schedule_names, tenant_id=alpha.id, schedule_ids=[schedule_id])
    theirs = db.read_now(schedule_names, tenant_id=beta.id, schedule_ids=[schedule_id])
    assert mine == {schedule_id: "nightly report"} and theirs == {}
