"""Login CSRF: the sign-in and setup forms carry a pre-session token (double submit of
the ``steeple_form`` cookie), and an ``Origin: null`` POST (a sandboxed frame) is refused
like any other site's (issue: a sandboxed cross-site iframe signed a victim into the
attacker's account). Real Chromium runs the attack in ``test_browser_login_csrf.py``."""

from __future__ import annotations

from appliance.store.infra.database import Database
from appliance.store.schedules import list_schedules
from appliance.store.users import create_user, issue_setup_token
from tests.api.conftest import START
from tests.ui.conftest import PASSWORD, Browser, Tenant, schedule_form


def set_cookies(page_headers: object) -> str:
    assert hasattr(page_headers, "getlist")
    return " | ".join(page_headers.getlist("Set-Cookie"))


async def test_the_login_form_sets_a_strict_http_only_token_cookie_it_echoes(
    browser: Browser,
) -> None:
    form = await browser.get("/login")
    cookie = set_cookies(form.headers)
    assert cookie.startswith("steeple_form=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    value = cookie.split(";")[0].removeprefix("steeple_form=")
    assert f'name="csrf_token" value="{value}"' in form.text
    again = await browser.get("/login")  # the browser's token is kept, not replaced
    assert "steeple_form" not in set_cookies(again.headers) and browser.csrf == value
    over_https = await Browser(browser.app).client.get("/login", scheme="https")
    assert "Secure" in set_cookies(over_https.headers) and "Secure" not in cookie


async def test_a_sign_in_without_or_with_a_wrong_pre_session_token_is_refused(
    browser: Browser, alpha: Tenant
) -> None:
    credentials = {"email": alpha.owner, "password": PASSWORD}
    no_form_yet = await browser.post("/login", credentials, csrf=False)  # no cookie either
    assert no_form_yet.status == 403 and "security token" in no_form_yet.text
    await browser.get("/login")
    missing = await browser.post("/login", credentials, csrf=False)
    wrong = await browser.post("/login", credentials | {"csrf_token": "x" * 43}, csrf=False)
    assert missing.status == wrong.status == 403
    for refused in (no_form_yet, missing, wrong):
        assert "steeple_session" not in set_cookies(refused.headers)
    other = Browser(browser.app)  # the attacker's own valid pair is no use in another jar
    await other.get("/login")
    stolen = await browser.post("/login", credentials | {"csrf_token": other.csrf}, csrf=False)
    assert stolen.status == 403
    assert (await browser.post("/login", credentials)).status == 302  # the form's own token


async def test_origin_null_is_refused_on_sign_in_and_every_other_post(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    null = {"Origin": "null"}
    framed = await browser.login(alpha.owner, headers=null)  # with a valid token even
    assert framed.status == 403 and "another site" in framed.text
    assert "steeple_session" not in set_cookies(framed.headers)
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form(), headers=null)
    assert created.status == 403
    assert (await browser.post("/logout", {}, headers=null)).status == 403
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []
    same_site = await browser.post(
        "/schedules/new", schedule_form(), headers={"Origin": "http://localhost"}
    )
    assert same_site.status == 302  # this host's own origin still passes


async def test_the_setup_form_needs_its_pre_session_token(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    user = db.write_now(
        create_user, email="new@alpha.example", tenant_id=alpha.id, role="viewer",
        operator=False, password_hash=None, now=START,
    )  # fmt: skip
    token = db.write_now(issue_setup_token, user_id=user.id, now=START)
    fields = {"password": PASSWORD, "repeat": PASSWORD}
    assert (await browser.post(f"/setup/{token}", fields, csrf=False)).status == 403
    await browser.get(f"/setup/{token}")
    framed = await browser.post(f"/setup/{token}", fields, headers={"Origin": "null"})
    assert framed.status == 403
    assert (await browser.get(f"/setup/{token}")).status == 200  # nothing was used up
    done = await browser.post(f"/setup/{token}", fields)
    assert done.status == 302 and done.headers["Location"] == "/"  # signed in
