"""The web UI in real Chromium (Playwright's sync API, Debian's ``chromium`` package)
against a real appliance process and a real receiver: the walkthrough a new user does,
the viewer's read-only view, screenshots for the README (light and dark: into a temporary
directory, or ``$STEEPLE_SCREENSHOTS``, which ``scripts/screenshots`` sets to ``docs/ui/``),
and axe-core's accessibility check (vendored under ``tests/ui/vendor``).

Waits are Playwright's auto-waiting assertions and the receiver's condition waits, with
deadlines; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, Receiver, create_tenant, steeple

pytestmark = pytest.mark.slow

CHROMIUM_PATHS = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
PASSWORD = "correct horse battery staple"
AXE = Path(__file__).resolve().parent / "vendor" / "axe-4.14.1.min.js"
TIMEOUT_MS = 30_000


def chromium_path() -> str:
    for path in CHROMIUM_PATHS:
        if Path(path).exists():
            return path
    found = shutil.which("chromium")
    if found:
        return found
    pytest.skip(
        "no Chromium for the browser tests: install Debian's package with"
        " `apt-get install chromium` (.ci/run does when it runs as root)"
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable)
        yield browser
        browser.close()


def add_user(data_dir: Path, email: str, tenant: str, role: str) -> None:
    password_file = data_dir.parent / f"{email}.password"
    password_file.write_text(PASSWORD + "\n")
    done = steeple(
        "user", "create", email, "--tenant", tenant, "--role", role,
        "--password-file", str(password_file), "--data-dir", str(data_dir),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def sign_in(page: object, base_url: str, email: str) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.goto(f"{base_url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$STEEPLE_SCREENSHOTS`` (``scripts/screenshots`` points it at
    ``docs/ui/``), else a temporary directory — a test run writes nothing into the tree."""
    chosen = os.environ.get("STEEPLE_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")


def shoot(page: object, name: str, directory: Path) -> None:
    """Screenshots of the current page in light and dark, into ``directory``."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    directory.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=str(directory / f"{name}-{scheme}.png"), full_page=True)
    page.emulate_media(color_scheme="light")


def serious_violations(page: object) -> list[str]:
    """axe-core's serious and critical violations on the current page."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    assert result["testEngine"] == {"name": "axe-core", "version": "4.14.1"}
    assert result["passes"], "axe checked nothing"
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def axe_on(page: object, base_url: str, paths: list[str]) -> dict[str, list[str]]:
    """Serious and critical violations of each page, light and dark, by page."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    violations = {}
    for path in paths:
        page.goto(f"{base_url}{path}")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            found = serious_violations(page)
            if found:
                violations[f"{path} ({scheme})"] = found
    page.emulate_media(color_scheme="light")
    return violations


def test_walkthrough_sign_in_create_deliver_replay_rotate_sign_out(
    tmp_path: Path, browser: object, screenshots: Path
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    tenant = create_tenant(data_dir, "acme")
    add_user(data_dir, "owner@acme.example", "acme", "owner")
    receiver = Receiver()
    app = Appliance(data_dir).start()
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        page.goto(f"{app.base_url}/login")
        shoot(page, "login", screenshots)
        sign_in(page, app.base_url, "owner@acme.example")
        feed = context.new_page()  # a second tab on the feed, open while the user works
        feed.goto(f"{app.base_url}/events")
        expect(feed.get_by_role("heading", name="Events")).to_be_visible()
        # it follows the SSE stream; a further feed tab polls (one stream per browser)
        expect(feed.locator("#new-events")).to_have_attribute("data-mode", "stream")
        extra = context.new_page()
        extra.goto(f"{app.base_url}/events")
        expect(extra.locator("#new-events")).to_have_attribute("data-mode", "poll")

        page.goto(f"{app.base_url}/schedules/new")
        page.get_by_label("Name").fill("<img src=x onerror=alert(1)>")
        # the Kind radio shows one field: an interval previews from now, in UTC
        page.get_by_role("radio", name="Every").check()
        expect(page.get_by_role("textbox", name="Cron", exact=True)).to_be_hidden()
        page.get_by_role("textbox", name="Every", exact=True).fill("90s")
        preview = page.locator("#preview")
        expect(preview.locator("tbody tr")).to_have_count(5)
        page.get_by_role("radio", name="Cron").check()
        expect(page.get_by_role("textbox", name="Every", exact=True)).to_be_hidden()
        page.get_by_role("textbox", name="Cron", exact=True).fill("* * * * * *")
        page.get_by_label("Timezone").fill("Europe/Berlin")
        page.get_by_label("Target URL").fill(receiver.url)
        page.get_by_role("textbox", name="Payload", exact=True).fill('{"hello": "world"}')
        expect(preview.get_by_role("table")).to_be_visible()
        expect(preview).to_contain_text("CET")  # the zone's abbreviation, beside UTC
        expect(preview).to_contain_text("Target URL allowed")
        shoot(page, "schedule-new", screenshots)
        page.get_by_role("button", name="Create schedule").click()
        expect(page.get_by_role("status")).to_have_text("Schedule created.")
        expect(page.get_by_role("heading", level=1)).to_have_text("<img src=x onerror=alert(1)>")

        receiver.wait_for(lambda ds: len(ds) >= 1)
        # The delivery arrived; its outcome commits right after: reload until the page
        # shows it (server-rendered, so a reload is how a user without JS sees it too).
        deadline = time.monotonic() + 30
        while not page.get_by_text("succeeded").count() and time.monotonic() < deadline:
            page.reload()
        expect(page.get_by_text("succeeded").first).to_be_visible()
        shoot(page, "schedule", screenshots)
        page.get_by_role("button", name="Pause").click()
        expect(page.get_by_role("status")).to_have_text("Schedule paused.")
        # the last succeeded run (rows are newest first)
        page.locator("tr", has_text="succeeded").first.get_by_role("link").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text(
            "Run of <img src=x onerror=alert(1)>"
        )
        key = page.locator("#idempotency-key").inner_text()
        assert re.fullmatch(r"[0-9a-f]{64}", key)
        before = len([d for d in receiver.snapshot() if d.key == key])
        shoot(page, "run", screenshots)
        page.get_by_role("button", name="Replay (same key)").click()
        expect(page.get_by_role("status")).to_have_text(
            "Run replayed with the same idempotency key."
        )
        receiver.wait_for(lambda ds: len([d for d in ds if d.key == key]) > before)

        # both feed tabs offer a "N new events" link without a reload, live or polled
        expect(extra.get_by_role("link", name=re.compile(r"new events?: show"))).to_be_visible()
        extra.close()
        expect(feed.get_by_role("link", name=re.compile(r"new events?: show"))).to_be_visible()
        feed.get_by_role("link", name=re.compile(r"new events?: show")).click()
        # The pause, not the create: an every-second schedule writes an event a second, so
        # on a slow box the create may already be older than the feed's newest 50.
        expect(feed.get_by_role("cell", name="schedule.paused")).to_be_visible()
        shoot(feed, "events", screenshots)
        feed.close()

        for path, name in (("/failed", "failed"), ("/guide", "guide"), ("/settings/keys", "keys")):
            page.goto(f"{app.base_url}{path}")
            shoot(page, name, screenshots)
        page.goto(f"{app.base_url}/settings/secrets")
        shoot(page, "secrets", screenshots)
        page.get_by_label(re.compile("Overlap")).fill("0")
        page.get_by_role("button", name="Rotate secret").click()
        new_secret = page.locator("#new-secret").inner_text()
        assert new_secret.startswith("whsec_") and new_secret != tenant["signing_secret"]
        expect(page.get_by_text("it will not be shown again")).to_be_visible()
        page.goto(f"{app.base_url}/")
        shoot(page, "dashboard", screenshots)
        page.goto(f"{app.base_url}/schedules")
        shoot(page, "schedules", screenshots)
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        page.goto(f"{app.base_url}/schedules")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        assert dialogs == []  # the canary name never ran as markup
    finally:
        context.close()
        app.kill()
        receiver.close()


def test_viewer_cannot_change_anything_other_tenants_get_404_and_pages_pass_axe(
    tmp_path: Path, browser: object, screenshots: Path
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    tenant = create_tenant(data_dir, "acme")
    add_user(data_dir, "viewer@acme.example", "acme", "viewer")
    create_tenant(data_dir, "beta")
    add_user(data_dir, "owner@beta.example", "beta", "owner")
    app = Appliance(data_dir).start()
    context = browser.new_context(bypass_csp=True)  # our CSP refuses axe's injected script
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        with app.client(tenant["api_key"]) as api:
            body = {"name": "hourly", "cron": "0 * * * *", "target_url": "http://127.0.0.1:9/x"}
            created = api.post("/v1/schedules", json=body | {"payload": {}})
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]
        sign_in(page, app.base_url, "viewer@acme.example")
        page.goto(f"{app.base_url}/schedules/{schedule_id}")
        expect(page.get_by_role("heading", level=1)).to_have_text("hourly")
        assert page.get_by_role("button", name="Pause").count() == 0
        assert page.get_by_role("button", name="Run now").count() == 0
        csrf = page.locator("input[name=csrf_token]").first.get_attribute("value")
        refused = page.request.post(
            f"{app.base_url}/schedules/{schedule_id}/pause", form={"csrf_token": csrf or ""}
        )
        assert refused.status == 403
        without_token = page.request.post(f"{app.base_url}/schedules/{schedule_id}/pause")
        assert without_token.status == 403
        violations = axe_on(
            page,
            app.base_url,
            ["/", "/schedules", f"/schedules/{schedule_id}", "/failed", "/events", "/guide"],
        )
        assert violations == {}, json.dumps(violations, indent=1)
        page.get_by_role("button", name="Sign out").click()
        sign_in(page, app.base_url, "owner@beta.example")  # another tenant's owner
        for path in (f"/schedules/{schedule_id}", f"/schedules/{schedule_id}/edit"):
            answer = page.goto(f"{app.base_url}{path}")
            assert answer is not None and answer.status == 404, path
            expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
        owner_pages = [
            "/schedules",
            "/schedules/new",
            "/settings/keys",
            "/settings/secrets",
            "/settings/users",
        ]
        violations = axe_on(page, app.base_url, owner_pages)
        assert violations == {}, json.dumps(violations, indent=1)
        page.get_by_role("button", name="Sign out").click()
        password_file = data_dir.parent / "ops.password"
        password_file.write_text(PASSWORD + "\n")
        made = steeple("admin", "create", "ops@example.com", "--password-file",
                       str(password_file), "--data-dir", str(data_dir))  # fmt: skip
        assert made.returncode == 0, made.stderr
        page.goto(f"{app.base_url}/login")
        page.get_by_label("Email").fill("ops@example.com")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Tenants")).to_be_visible()
        page.get_by_role("link", name="Health (operator)").click()
        expect(page.get_by_role("heading", name="Health")).to_be_visible()
        shoot(page, "admin-health", screenshots)
        page.goto(f"{app.base_url}/admin/tenants")
        shoot(page, "admin-tenants", screenshots)
        violations = axe_on(page, app.base_url, ["/admin/health", "/admin/tenants"])
        assert violations == {}, json.dumps(violations, indent=1)
    finally:
        context.close()
        app.kill()
