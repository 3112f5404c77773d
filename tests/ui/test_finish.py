"""The finish of every page, without JavaScript: a favicon and logo, the current page
marked in the navigation, and the schedule form's advanced options grouped and collapsed
unless one of them needs to be seen."""

from __future__ import annotations

import re

from tests.ui.conftest import Browser, Tenant, schedule_form

ADVANCED = re.compile(r'<details class="advanced" id="advanced"( open)?>')


def current_links(html: str) -> list[str]:
    return re.findall(r'<a href="([^"]+)" aria-current="page">', html)


async def test_every_page_links_the_vendored_favicon_and_shows_the_logo(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.owner)
    page = await browser.get("/")
    assert '<link rel="icon" type="image/svg+xml" href="/static/steeple.svg">' in page.text
    assert '<img class="logo" src="/static/steeple.svg" alt=""' in page.text
    icon = await browser.client.get("/static/steeple.svg")
    assert icon.status_code == 200
    assert (await icon.get_data(as_text=True)).startswith("<svg")
    login = await Browser(browser.app).get("/login")
    assert 'rel="icon"' in login.text


async def test_the_navigation_marks_the_current_section_once(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.owner)
    created = await browser.post("/schedules/new", schedule_form())
    schedule_path = created.headers["Location"].split("?")[0]
    expected = {
        "/": "/",
        "/schedules": "/schedules",
        "/schedules/new": "/schedules",
        schedule_path: "/schedules",
        "/failed": "/failed",
        "/events": "/events",
        "/guide": "/guide",
        "/settings/keys": "/settings/keys",
        "/settings/users": "/settings/users",
        "/settings/account": "/settings/account",
    }
    for path, entry in expected.items():
        page = await browser.get(path)
        assert page.status == 200, path
        assert current_links(page.text) == [entry], path


async def test_advanced_options_are_collapsed_unless_changed_or_wrong(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    blank = ADVANCED.search((await browser.get("/schedules/new")).text)
    assert blank is not None and blank.group(1) is None  # collapsed
    created = await browser.post("/schedules/new", schedule_form(catchup_policy=""))
    edit_path = created.headers["Location"].split("?")[0] + "/edit"
    unchanged = ADVANCED.search((await browser.get(edit_path)).text)
    assert unchanged is not None and unchanged.group(1) is None, "defaults: collapsed"

    changed = await browser.post(
        "/schedules/new", schedule_form(jitter_seconds="30", form_key="j" * 43)
    )
    edited = ADVANCED.search(
        (await browser.get(changed.headers["Location"].split("?")[0] + "/edit")).text
    )
    assert edited is not None and edited.group(1) == " open", "a non-default value shows"

    wrong = await browser.post("/schedules/new", schedule_form(max_attempts="0", form_key="w" * 43))
    assert wrong.status == 422
    opened = ADVANCED.search(wrong.text)
    assert opened is not None and opened.group(1) == " open", "an error shows"
