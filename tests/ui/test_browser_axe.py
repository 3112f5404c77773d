"""axe-core on every page of the web UI, in real Chromium against a real appliance
process, light and dark: each GET page as the roles that see it differently (owner,
editor, viewer; the operator's pages), the error pages, the fragments pages swap in (the
live preview, the feed's "new events" link) and the pages a POST answers with (a key
shown once, a refused sign-in, a form with its errors…; those in
test_browser_axe_answers.py, on this module's site). A route the tables below do not
place fails ``test_every_ui_route_is_checked_by_axe``: a new page cannot skip the check.

The site's pages are also shot for docs/ui.md (``shoot``; ``scripts/screenshots``).
Waits are Playwright's auto-waiting assertions and the receiver's condition waits; a
state the engine commits just after a delivery is awaited by asking the API to a deadline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from quart_trio import QuartTrio

from tests.e2e.harness import Action, Appliance, Receiver, create_tenant, steeple
from tests.ui.test_browser import (
    PASSWORD,
    TIMEOUT_MS,
    add_user,
    axe_on,
    browser,
    screenshots,
    serious_violations,
    shoot,
    sign_in,
)

__all__ = ["browser", "screenshots"]  # the shared module-scoped fixtures

OWNER, EDITOR, VIEWER, OPERATOR = (
    "owner@acme.example", "eve@acme.example", "vic@acme.example", "ops@example.com",
)  # fmt: skip
SPARE = "sam@acme.example"  # the user the owner re-roles, resets and removes
REFUSED_URL = "http://169.254.169.254/latest"

# Each GET endpoint that answers a page: the paths axe checks, as whom. ``{name}`` is a
# Site field. Pages whose controls differ by role are checked as each of those roles.
GET_PAGES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "ui.login_form": (("/login", ("signed out",)),),
    "ui.setup_form": (("/setup/{setup_token}", ("signed out",)),),
    "ui.dashboard": (("/", ("owner", "viewer")),),
    "ui.events": (("/events", ("owner",)),),
    "ui.guide": (("/guide", ("viewer",)),),
    "ui.list_page": (
        ("/schedules", ("editor", "viewer")),
        ("/schedules?status=completed", ("owner",)),
    ),
    "ui.new_form": (("/schedules/new", ("editor",)),),
    "ui.schedule_page": (
        ("/schedules/{schedule_id}", ("owner", "viewer")),
        ("/schedules/{one_off_id}", ("editor",)),
    ),
    "ui.edit_form": (("/schedules/{schedule_id}/edit", ("editor",)),),
    "ui.delete_form": (("/schedules/{schedule_id}/delete", ("editor",)),),
    "ui.run_page": (
        ("/runs/{run_id}", ("owner", "viewer")),
        ("/runs/{failed_run_id}", ("editor",)),
    ),
    "ui.failed": (("/failed", ("editor", "viewer")),),
    "ui.confirm_all": (("/failed/replay-all", ("editor",)),),
    "ui.keys": (("/settings/keys", ("owner",)),),
    "ui.revoke_form": (("/settings/keys/{key_id}/revoke", ("owner",)),),
    "ui.secrets": (("/settings/secrets", ("owner",)),),
    "ui.users": (("/settings/users", ("owner",)),),
    "ui.remove_form": (("/settings/users/{viewer_id}/remove", ("owner",)),),
    "ui.account": (("/settings/account", ("owner", "viewer")),),
    "ui.notifications": (("/settings/notifications", ("owner",)),),
    "ui.health": (("/admin/health", ("operator",)),),
    "ui.tenant_list": (("/admin/tenants", ("operator",)),),
}
# The pages docs/ui.md shows that other browser tests do not shoot: (role, path) -> name.
SHOTS = {
    ("owner", "/"): "dashboard-charts",
    ("owner", "/schedules/{schedule_id}"): "schedule-runs",
    ("owner", "/settings/account"): "account",
    ("owner", "/settings/keys/{key_id}/revoke"): "key-revoke",
    ("owner", "/settings/users/{viewer_id}/remove"): "user-remove",
    ("editor", "/schedules/{one_off_id}"): "schedule-completed",
    ("editor", "/schedules/{schedule_id}/delete"): "schedule-delete",
    ("editor", "/runs/{failed_run_id}"): "run-failed",
    ("editor", "/failed/replay-all"): "replay-all",
    ("viewer", "/schedules/sch_00000000000000000000000000"): "not-found",
}
# Endpoints whose answer is a page or a fragment of one: checked by doing what a user does
# (test_browser_axe_answers.py records each as it checks it).
ANSWER_PAGES = {
    "ui.login": "a refused sign-in",
    "ui.setup": "the setup form with its error",
    "ui.create": "the new-schedule form with its field errors",
    "ui.save": "the edit form with its field errors",
    "ui.preview_page": "the live preview inside the form, allowed and refused",
    "ui.new_events": "the feed's new-events link on /events",
    "ui.create_key": "the key shown once",
    "ui.rotate": "the new secret shown once",
    "ui.reveal": "a secret revealed",
    "ui.add_user": "the new user's setup link",
    "ui.reset": "a fresh setup link",
    "ui.set_role": "the users page after a role change",
    "ui.remove": "the users page after a removal",
    "ui.new_password": "the account page with a refused password",
    "ui.end_sessions": "the account page after ending sessions",
    "ui.save_notifications": "a refused notification URL",
    "ui.add_tenant": "a new tenant's key and secret shown once",
    "ui.add_tenant_user": "the operator's setup link",
}
# Endpoints that answer with a redirect to a page checked above, or are no page at all.
NOT_PAGES = {
    "ui.static": "files",
    "ui.event_stream": "an event stream",
    "ui.logout": "redirects to /login",
    "ui.pause": "redirects to the schedule page",
    "ui.resume": "redirects to the schedule page",
    "ui.run_now": "redirects to the schedule page",
    "ui.change_selected": "redirects to /schedules",
    "ui.delete": "redirects to /schedules",
    "ui.replay": "redirects to the run page",
    "ui.replay_selected": "redirects to /failed",
    "ui.replay_all": "redirects to /failed",
    "ui.revoke_key": "redirects to /settings/keys",
    "ui.remove_notifications": "redirects to /settings/notifications",
    "ui.suspend_tenant_view": "redirects to /admin/tenants",
    "ui.resume_tenant_view": "redirects to /admin/tenants",
}


def test_every_ui_route_is_checked_by_axe(app: QuartTrio) -> None:
    """A new UI route fails here until it is placed: a page axe checks, or said why not."""
    endpoints = {
        rule.endpoint for rule in app.url_map.iter_rules() if rule.endpoint.startswith("ui.")
    }
    placed = [*GET_PAGES, *ANSWER_PAGES, *NOT_PAGES]
    assert len(placed) == len(set(placed))  # each in one table
    assert set(placed) == endpoints


@dataclass(frozen=True)
class Site:
    app: Appliance
    api_key: str
    schedule_id: str
    one_off_id: str
    run_id: str
    failed_run_id: str
    key_id: str
    viewer_id: str
    setup_token: str

    def path(self, template: str) -> str:
        return template.format(**{k: v for k, v in vars(self).items() if isinstance(v, str)})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A tenant whose owner, editor and viewer see a schedule with delivered runs (its
    strip and sparkline), a failed run and a fired one-off (``completed``), a key and an
    invited user; an operator."""
    data_dir = tmp_path_factory.mktemp("axe") / "data"
    tenant = create_tenant(data_dir, "acme")
    for email, role in (
        (OWNER, "owner"),
        (EDITOR, "editor"),
        (VIEWER, "viewer"),
        (SPARE, "viewer"),
    ):
        add_user(data_dir, email, "acme", role)
    password_file = data_dir.parent / "ops.password"
    password_file.write_text(PASSWORD + "\n")
    made = steeple("admin", "create", OPERATOR, "--password-file",
                   str(password_file), "--data-dir", str(data_dir))  # fmt: skip
    assert made.returncode == 0, made.stderr
    invited = steeple("user", "create", "new@acme.example", "--tenant", "acme", "--role",
                      "viewer", "--data-dir", str(data_dir))  # fmt: skip
    assert invited.returncode == 0, invited.stderr
    listed = steeple("user", "list", "--tenant", "acme", "--data-dir", str(data_dir))
    users = {u["email"]: u["id"] for u in json.loads(listed.stdout)["users"]}
    receiver = Receiver(respond=lambda d: Action(status=500 if b"fail" in d.body else 200))
    app = Appliance(data_dir).start()
    try:
        with app.client(tenant["api_key"]) as api:
            every = {"cron": "* * * * * *"}
            ids = [
                create_schedule(api, "every second", receiver.url, {"ok": True}, **every),
                create_schedule(api, "always fails", receiver.url, {"fail": True}),
            ]
            receiver.wait_for(lambda ds: len(ds) >= 3)  # the strip and sparkline get points
            assert api.post(f"/v1/schedules/{ids[0]}/pause", json={}).status_code == 200
            _wait_until(lambda: "running" not in _states(api, ids[0]))
            run_id = next(i for i, s in _states(api, ids[0]).items() if s == "succeeded")
            failed = api.post(f"/v1/schedules/{ids[1]}/trigger").json()["id"]
            at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
            one_off = create_schedule(api, "once", receiver.url, {"once": True}, at=at)
            receiver.wait_for(lambda ds: sum(b'"once"' in d.body for d in ds) >= 1)
            _wait_until(lambda: api.get(f"/v1/schedules/{one_off}").json()["status"] == "completed")
            _wait_until(lambda: api.get(f"/v1/runs/{failed}").json()["state"] == "failed")
            key_id = api.get("/v1/keys").json()["items"][0]["id"]
        yield Site(
            app=app, api_key=tenant["api_key"], schedule_id=ids[0], one_off_id=one_off,
            run_id=run_id, failed_run_id=failed, key_id=key_id, viewer_id=users[VIEWER],
            setup_token=json.loads(invited.stdout)["setup_link"].rsplit("/", 1)[1],
        )  # fmt: skip
    finally:
        app.kill()
        receiver.close()


def create_schedule(api: Any, name: str, url: str, payload: dict[str, bool], **when: str) -> str:
    body = {"name": name, "target_url": url, "payload": payload, "retry": {"max_attempts": 1}}
    created = api.post("/v1/schedules", json=body | (when or {"cron": "0 0 1 1 *"}))
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _states(api: Any, schedule_id: str) -> dict[str, str]:
    runs = api.get(f"/v1/schedules/{schedule_id}/runs").json()["items"]
    return {r["id"]: r["state"] for r in runs}


def _wait_until(condition: Any, timeout: float = 30) -> None:
    """The engine commits an outcome just after the receiver answers: ask to a deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the state never came"


ROLES = {
    "signed out": None,
    "owner": OWNER,
    "editor": EDITOR,
    "viewer": VIEWER,
    "operator": OPERATOR,
}


def page_as(browser: Any, site: Site, role: str, **options: Any) -> Any:
    context = browser.new_context(bypass_csp=True, **options)  # our CSP refuses axe's script
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    email = ROLES[role]
    if email == OPERATOR:
        page.goto(f"{site.app.base_url}/login")
        page.get_by_label("Email").fill(OPERATOR)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("heading", name="Tenants").wait_for()
    elif email is not None:
        sign_in(page, site.app.base_url, email)
    return page


@pytest.mark.slow
@pytest.mark.parametrize("role", [*ROLES])
def test_every_page_passes_axe_as_each_role_that_sees_it(
    browser: Any, site: Site, screenshots: Path, role: str
) -> None:
    page = page_as(browser, site, role)
    try:
        paths = [site.path(p) for routes in GET_PAGES.values() for p, who in routes if role in who]
        assert paths
        violations = axe_on(page, site.app.base_url, paths)
        assert violations == {}, json.dumps(violations, indent=1)
        for (who, template), name in SHOTS.items():
            if who == role:
                page.goto(f"{site.app.base_url}{site.path(template)}")
                shoot(page, name, screenshots)
    finally:
        page.context.close()


@pytest.mark.slow
def test_error_pages_pass_axe(browser: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page = page_as(browser, site, "viewer")
    try:
        for path, status, heading in (
            ("/schedules/sch_00000000000000000000000000", 404, "Not found"),
            ("/runs/run_nope", 404, "Not found"),
            ("/settings/keys", 403, "Not allowed"),
        ):
            answer = page.goto(f"{site.app.base_url}{path}")
            assert answer is not None and answer.status == status, path
            expect(page.get_by_role("heading", level=1)).to_have_text(heading)
            assert axe_here(page) == {}, path
    finally:
        page.context.close()


def axe_here(page: Any) -> dict[str, list[str]]:
    """Serious and critical violations of the page as it is now, light and dark."""
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        if violations := serious_violations(page):
            found[scheme] = violations
    page.emulate_media(color_scheme="light")
    return found
