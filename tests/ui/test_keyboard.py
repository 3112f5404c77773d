"""The web UI by keyboard alone, in real Chromium against a real appliance process: sign
in, create a schedule and pause it with a note using only Tab, Shift+Tab, typing, Enter
and Space (no mouse, no ``fill``, no ``click``); every focus is visibly outlined
(``:focus-visible`` in the stylesheet), the skip link leads into the page's content, and
every interactive element of the schedules page is reachable by Tab.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Appliance, create_tenant
from tests.ui.test_browser import PASSWORD, TIMEOUT_MS, add_user, browser  # noqa: F401

pytestmark = pytest.mark.slow

MAX_TABS = 80
# What a keyboard user must be able to reach: links, controls, and scroll regions.
INTERACTIVE = (
    "a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]),"
    " select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex='-1'])"
)
# The focused element, described; and whether its focus is drawn (an outline, or the
# browser's own ring replaced by ours: :focus-visible matches and an outline is painted).
FOCUSED_JS = """(selector) => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  return {
    tag: el.tagName.toLowerCase(),
    id: el.id,
    name: el.getAttribute("name") || "",
    label: (el.getAttribute("aria-label") || el.textContent || el.value || "").trim().slice(0, 60),
    visible: el.matches(":focus-visible") && style.outlineStyle !== "none"
      && parseFloat(style.outlineWidth) >= 2,
    inMain: !!el.closest("main"),
    index: [...document.querySelectorAll(selector)].indexOf(el),
  };
}"""
ALL_JS = """(selector) => [...document.querySelectorAll(selector)]
  .map((el, index) => ({index, el}))
  .filter(({el}) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden")
  .map(({index, el}) => ({index, what: el.tagName.toLowerCase() + " "
    + (el.id || el.getAttribute("name") || el.getAttribute("aria-label")
       || el.textContent.trim().slice(0, 40))}))"""
# (a shorthand with var() leaves its longhands empty in the CSSOM: read the rule's text)
FOCUS_RULE_JS = """() => [...document.styleSheets].flatMap((sheet) => [...sheet.cssRules])
  .some((rule) => rule.selectorText && rule.selectorText.includes(":focus-visible")
    && /outline:\\s*(?!none)/.test(rule.style.cssText))"""


class Keyboard:
    """Tab, Shift+Tab, type and press, asserting every focus is visible."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.unseen: list[dict[str, Any]] = []

    def focused(self) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.page.evaluate(FOCUSED_JS, INTERACTIVE)
        if found is not None and not found["visible"]:
            self.unseen.append(found)
        return found

    def tab(self, back: bool = False) -> dict[str, Any] | None:
        self.page.keyboard.press("Shift+Tab" if back else "Tab")
        return self.focused()

    def tab_to(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        for _ in range(MAX_TABS):
            found = self.tab()
            if found is not None and wanted(found):
                return found
        raise AssertionError(f"not reached by Tab on {self.page.url}")

    def type_into(self, element_id: str, text: str) -> None:
        self.tab_to(lambda f: f["id"] == element_id)
        self.page.keyboard.press("Control+A")
        self.page.keyboard.press("Delete")
        if text:
            self.page.keyboard.type(text)


def labelled(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f["label"] == text


def test_sign_in_create_and_pause_with_the_keyboard_alone(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    data_dir = tmp_path / "data"
    create_tenant(data_dir, "acme")
    add_user(data_dir, "editor@acme.example", "acme", "editor")
    app = Appliance(data_dir).start()
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    keys = Keyboard(page)
    try:
        page.goto(f"{app.base_url}/login")
        assert page.evaluate(FOCUS_RULE_JS), "no :focus-visible outline rule in the stylesheet"
        keys.type_into("email", "editor@acme.example")
        keys.type_into("password", PASSWORD)
        keys.tab_to(labelled("Sign in"))
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

        # the skip link comes first and leads into the content
        first = keys.tab()
        assert first is not None and first["label"] == "Skip to content", first
        page.keyboard.press("Enter")
        inside = keys.tab()
        assert inside is not None and inside["inMain"], inside
        back = keys.tab(back=True)
        assert back is not None and not back["inMain"], back  # Shift+Tab goes back out

        page.goto(f"{app.base_url}/schedules")
        keys.tab_to(labelled("New schedule"))
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="New schedule")).to_be_visible()
        keys.type_into("name", "keyboard only")
        keys.type_into("cron", "0 3 * * *")
        keys.type_into("timezone", "UTC")
        keys.type_into("target_url", "http://127.0.0.1:9/keyboard")
        keys.type_into("payload", '{"by": "keyboard"}')
        expect(page.locator("#preview").get_by_role("table")).to_be_visible()
        keys.tab_to(labelled("Create schedule"))
        page.keyboard.press("Enter")
        expect(page.get_by_role("status")).to_have_text("Schedule created.")
        expect(page.get_by_role("heading", level=1)).to_have_text("keyboard only")

        keys.type_into("note", "paused by keyboard")
        keys.tab_to(labelled("Pause"))
        page.keyboard.press("Space")
        expect(page.get_by_role("status")).to_have_text("Schedule paused.")
        expect(page.locator("#pause-note")).to_have_text("paused by keyboard")

        page.goto(f"{app.base_url}/schedules")
        expected = {item["index"]: item["what"] for item in page.evaluate(ALL_JS, INTERACTIVE)}
        assert len(expected) > 15, expected  # nav, filters, bulk actions, the row's controls
        reached: set[int] = set()
        for _ in range(len(expected) + 5):
            found = keys.tab()
            if found is not None and found["index"] >= 0:
                reached.add(found["index"])
        missing = {what for index, what in expected.items() if index not in reached}
        assert not missing, f"not reachable by Tab on /schedules: {sorted(missing)}"
        assert keys.unseen == [], f"focus not visible on: {keys.unseen}"
    finally:
        context.close()
        app.kill()
