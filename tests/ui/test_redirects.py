"""Post-sign-in and post-action redirects stay on this origin, read as a browser reads a
``Location`` (WHATWG URL rules), not only as Python does (``ui/redirects.py``)."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from hypothesis import example, given
from hypothesis import strategies as st

from appliance.store.infra.database import Database
from appliance.store.schedules import list_schedules
from appliance.ui.redirects import local_path
from tests.ui.conftest import Browser, Tenant, schedule_form

BASE = "http://steeple.test/"
DEFAULT = "/fallback"
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
PIECES = ["/", "\\", "\t", "\n", "\r", " ", "\x00", "\x7f", ":", "@", "%09", "%2f", ".", "?",
          "#", "é", "http:", "javascript:", "evil.example", "a"]  # fmt: skip


def browser_reading(location: str) -> str:
    """Where a browser goes for ``location`` on BASE: the WHATWG pre-processing of a URL
    string (strip C0 controls and spaces, drop tabs and newlines, ``\\`` is ``/`` under a
    special scheme), then resolution against the base."""
    cleaned = re.sub(r"[\t\n\r]", "", location.strip(_C0_OR_SPACE)).replace("\\", "/")
    return urljoin(BASE, cleaned)


def stays_home(target: str) -> bool:
    read_by_python, read_by_a_browser = urljoin(BASE, target), browser_reading(target)
    return urlsplit(read_by_python).netloc == urlsplit(read_by_a_browser).netloc == "steeple.test"


@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join) | st.text(max_size=40))
@example("/%09/evil".replace("%09", "\t"))
@example("/\\evil")
@example("/\t/evil")
@example("\n//evil")
@example(" /evil")
@example("//evil")
@example("/\n\nSet-Cookie: x=1")
def test_a_target_is_kept_only_when_every_reader_keeps_it_on_this_origin(target: str) -> None:
    result = local_path(target, DEFAULT)
    assert result in (DEFAULT, target)
    if result == target:
        assert stays_home(result)
        assert not any(ord(c) < 0x21 or ord(c) >= 0x7F or c == "\\" for c in result)
        assert browser_reading(result) == urljoin(BASE, result)  # nothing for a browser to fix


def test_plain_local_paths_are_kept() -> None:
    for target in ("/", "/schedules", "/schedules?state=failed&x=%2F%2Fevil", "/a/b#c", "/%09x"):
        assert local_path(target, DEFAULT) == target
    for target in ("", "schedules", "//evil", "/\\evil", "/\t/evil", "https://evil", "/é"):
        assert local_path(target, DEFAULT) == DEFAULT


async def test_sign_in_with_a_tab_or_newline_in_next_goes_to_the_dashboard(
    browser: Browser, alpha: Tenant
) -> None:
    for raw in ("/%09/evil.example", "/%0a/evil.example", "/%0d%0aSet-Cookie:%20x=1", "/\\evil"):
        signed_in = await browser.login(alpha.viewer, path=f"/login?next={raw}")
        assert signed_in.status == 302, raw  # not a 500 after the session row
        assert signed_in.headers["Location"] == "/", raw
    kept = await browser.login(alpha.viewer, path="/login?next=/schedules%3Fstate%3Dfailed")
    assert kept.headers["Location"] == "/schedules?state=failed"


async def test_the_login_form_does_not_carry_a_foreign_next(
    browser: Browser, alpha: Tenant
) -> None:
    page = await browser.get("/login?next=/%09/evil.example")
    assert 'action="/login?next=/"' in page.text and "evil" not in page.text


async def test_an_action_with_a_backslash_back_returns_to_its_own_page(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form())
    (schedule,) = db.read_now(list_schedules, tenant_id=alpha.id, limit=10)
    assert created.status == 302
    for back in ("/\\evil.example", "/%09/evil.example", "%2F%2Fevil.example"):
        paused = await browser.post(f"/schedules/{schedule.id}/pause?back={back}", {})
        assert paused.headers["Location"] == f"/schedules/{schedule.id}?done=paused", back
    kept = await browser.post(f"/schedules/{schedule.id}/resume?back=/schedules", {})
    assert kept.headers["Location"] == "/schedules?done=resumed"
