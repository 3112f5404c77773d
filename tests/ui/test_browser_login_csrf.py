"""Login CSRF in real Chromium (issue: a sandboxed cross-site iframe signed a victim into
the attacker's account): a page of another site, served by a second loopback server,
frames ``sandbox="allow-forms allow-scripts"`` a form that posts the attacker's email,
password and own pre-session token to ``/login`` as soon as it loads (its ``Origin`` is
``null``), its answer shown in the frame, or in the whole tab (``allow-top-navigation``:
the browser then keeps the answer's cookie, which is how the unfixed appliance signed the
victim in as the attacker). The appliance refuses the POST (403); the victim's browser is
not signed in afterwards; signing in through the form still works.

Waits are Playwright's (the framed POST's answer, auto-waiting assertions); nothing sleeps.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import Appliance, create_tenant
from tests.ui.test_browser import (  # noqa: F401 (browser: the shared Chromium fixture)
    PASSWORD,
    TIMEOUT_MS,
    add_user,
    browser,
    shoot,
    sign_in,
)

pytestmark = pytest.mark.slow

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
ATTACKER = "mallory@acme.example"
VICTIM = "owner@acme.example"


# How the frame is sandboxed, and where its form's answer goes: into the frame itself
# (the frame), or the whole tab (a frame allowed to navigate its top: the
# answer's cookie is then a top-level navigation's, which the browser keeps).
FRAMES = {
    "in the frame": ("allow-forms allow-scripts", "_self"),
    "in the tab": ("allow-forms allow-scripts allow-top-navigation", "_top"),
}


def framed_form(action: str, token: str, target: str) -> str:
    """The frame's document: a form of the attacker's credentials, submitted on load."""
    fields = {"email": ATTACKER, "password": PASSWORD, "csrf_token": token}
    inputs = "".join(
        f'<input name="{name}" value="{html.escape(value)}">' for name, value in fields.items()
    )
    return (
        f'<!doctype html><form id="f" method="post" target="{target}"'
        f' action="{html.escape(action)}">{inputs}'
        "</form><script>document.getElementById('f').submit()</script>"
    )


@pytest.fixture
def attacker_site(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    """A second loopback server (another site: ``localhost``, not ``127.0.0.1``) serving
    ``/`` (the page the victim visits) and ``/frame`` (the sandboxed frame's form); the
    dict holds the frame's sandbox and what it posts where, filled in by the test."""
    frame: dict[str, str] = {}

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/frame":
                body = framed_form(frame["action"], frame["token"], frame["target"])
            else:
                body = (
                    '<!doctype html><h1>Cute cats</h1><iframe id="trap"'
                    f' sandbox="{frame["sandbox"]}" src="/frame"></iframe>'
                )
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}", frame
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("answered", FRAMES)
def test_a_sandboxed_cross_site_frame_cannot_sign_the_victim_in(
    tmp_path: Path,
    browser: object,  # noqa: F811 (the fixture imported above)
    attacker_site: tuple[str, dict[str, str]],
    answered: str,
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    data_dir = tmp_path / "data"
    create_tenant(data_dir, "acme")
    add_user(data_dir, VICTIM, "acme", "owner")
    add_user(data_dir, ATTACKER, "acme", "viewer")
    app = Appliance(data_dir).start()
    attacker_url, frame = attacker_site
    with httpx.Client(base_url=app.base_url, trust_env=False, timeout=30) as attacker:
        found = TOKEN.search(attacker.get("/login").text)  # the attacker's own token
        assert found is not None
        sandbox, target = FRAMES[answered]
        frame.update(
            action=f"{app.base_url}/login", token=found.group(1), sandbox=sandbox, target=target
        )
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(f"{app.base_url}/login")  # the victim has the appliance open: its cookie
        with page.expect_response(
            lambda r: r.url.startswith(f"{app.base_url}/login") and r.request.method == "POST"
        ) as posted:
            page.goto(attacker_url)
        answer = posted.value
        assert answer.request.headers.get("origin") == "null"
        own = context.new_page()  # the victim's next tab (the trap's may still navigate)
        own.goto(f"{app.base_url}/")
        assert ATTACKER not in own.content()  # not signed in as the attacker
        expect(own.get_by_role("heading", name="Sign in")).to_be_visible()
        assert not [c for c in context.cookies() if c["name"] == "steeple_session"]
        assert answer.status == 403, answer.status
        shoot(own, "login-csrf-refused", tmp_path / "screenshots")
        sign_in(own, app.base_url, VICTIM)  # the form itself still signs in
        expect(own.get_by_text(VICTIM)).to_be_visible()
    finally:
        context.close()
        app.kill()
