"""Sign-in, sessions, CSRF, roles, tenant isolation and escaping, through the app's test
client (a browser without JavaScript)."""

from __future__ import annotations

from appliance.store.infra.database import Database
from appliance.store.schedules import list_schedules
from appliance.store.sessions import MAX_FAILURES
from appliance.store.users import create_user, issue_setup_token
from tests.api.conftest import START, FakeClock, Nudges
from tests.ui.conftest import PASSWORD, Browser, Tenant, make_app, schedule_form


async def test_sign_in_sets_a_strict_session_cookie_and_shows_the_dashboard(
    browser: Browser, alpha: Tenant
) -> None:
    form = await browser.get("/login")
    assert 'for="email">Email<' in form.text and 'for="password">Password<' in form.text
    assert ">Sign in</button>" in form.text
    reply = await browser.login(alpha.editor, PASSWORD)
    assert reply.status == 302 and reply.headers["Location"] == "/"
    cookie = reply.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie
    dashboard = await browser.get("/")
    assert dashboard.status == 200 and "<h1>Dashboard</h1>" in dashboard.text
    assert alpha.editor in dashboard.text


async def test_wrong_password_and_unknown_email_get_the_same_generic_error(
    browser: Browser, alpha: Tenant
) -> None:
    wrong = await browser.login(alpha.owner, "nope")
    unknown = await browser.login("who@nowhere.example", PASSWORD)
    assert wrong.status == unknown.status == 401
    assert "The email or password is not right." in wrong.text
    assert "The email or password is not right." in unknown.text
    assert "Set-Cookie" not in wrong.headers


async def test_sign_in_is_throttled_per_account_even_with_the_right_password(
    browser: Browser, alpha: Tenant
) -> None:
    for _ in range(MAX_FAILURES):
        reply = await browser.login(alpha.owner, "wrong")
        assert reply.status == 401
    blocked = await browser.login(alpha.owner, PASSWORD)
    assert blocked.status == 429 and "Too many failed sign-ins" in blocked.text
    assert "Set-Cookie" not in blocked.headers


async def test_throttle_ends_when_the_failures_age_out(
    browser: Browser, alpha: Tenant, clock: FakeClock
) -> None:
    for _ in range(MAX_FAILURES):
        await browser.login(alpha.owner, "wrong")
    clock.advance(15 * 60_000 + 1)
    ok = await browser.login(alpha.owner, PASSWORD)
    assert ok.status == 302


async def test_pages_need_a_session_and_sign_out_revokes_it(
    browser: Browser, alpha: Tenant
) -> None:
    anonymous = await browser.get("/schedules")
    assert anonymous.status == 302
    assert anonymous.headers["Location"] == "/login?next=/schedules"
    await browser.sign_in(alpha.viewer)
    cookie = browser.client.cookie_jar  # the session cookie, kept to replay after sign-out
    saved = [(c.name, c.value) for c in cookie]
    assert (await browser.get("/schedules")).status == 200
    assert (await browser.post("/logout", {})).status == 302
    assert (await browser.get("/schedules")).status == 302
    for name, value in saved:  # the old cookie is dead on the server, not just forgotten
        browser.client.set_cookie("localhost", name, value)
    assert (await browser.get("/schedules")).status == 302


async def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    refused = await browser.post("/schedules/new", schedule_form(), csrf=False)
    assert refused.status == 403 and "security token" in refused.text
    wrong = await browser.post(
        "/schedules/new", schedule_form() | {"csrf_token": "x" * 43}, csrf=False
    )
    assert wrong.status == 403
    other_site = await browser.post(
        "/schedules/new", schedule_form(), headers={"Origin": "https://evil.example"}
    )
    assert other_site.status == 403
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []


async def test_security_headers_on_every_ui_answer(browser: Browser, alpha: Tenant) -> None:
    for page in (await browser.get("/login"), await browser.get("/static/steeple.css")):
        csp = page.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert page.headers["X-Frame-Options"] == "DENY"
        assert page.headers["X-Content-Type-Options"] == "nosniff"
    await browser.sign_in(alpha.owner)
    assert (await browser.get("/settings/keys")).headers["Cache-Control"] == "no-store"


async def test_a_viewer_reads_but_cannot_change_anything(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    editor = Browser(browser.app)
    await editor.sign_in(alpha.editor)
    created = await editor.post("/schedules/new", schedule_form())
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    await browser.sign_in(alpha.viewer)
    page = await browser.get(f"/schedules/{schedule_id}")
    assert page.status == 200 and "Run now" not in page.text and "Delete" not in page.text
    for path in (
        f"/schedules/{schedule_id}/pause",
        f"/schedules/{schedule_id}/run",
        f"/schedules/{schedule_id}/delete",
        "/schedules/new",
        "/settings/keys",
        "/settings/secrets/rotate",
    ):
        reply = await browser.post(path, schedule_form())
        assert reply.status == 403, path
    assert (await browser.get("/settings/keys")).status == 403
    (schedule,) = db.read_now(list_schedules, tenant_id=alpha.id, limit=10)
    assert not schedule.spec.paused and schedule.version == 1


async def test_another_tenants_ids_are_404_pages(
    browser: Browser, alpha: Tenant, beta: Tenant
) -> None:
    owner_a = Browser(browser.app)
    await owner_a.sign_in(alpha.owner)
    created = await owner_a.post("/schedules/new", schedule_form())
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    run = await owner_a.post(f"/schedules/{schedule_id}/run", {})
    run_id = run.headers["Location"].split("/")[2].split("?")[0]
    await browser.sign_in(beta.owner)
    for path in (f"/schedules/{schedule_id}", f"/schedules/{schedule_id}/edit", f"/runs/{run_id}"):
        page = await browser.get(path)
        assert page.status == 404 and "Not found" in page.text, path
    for path in (f"/schedules/{schedule_id}/pause", f"/runs/{run_id}/replay"):
        assert (await browser.post(path, {})).status == 404, path


async def test_a_schedule_name_with_markup_renders_as_text(browser: Browser, alpha: Tenant) -> None:
    await browser.sign_in(alpha.editor)
    canary = "<img src=x onerror=alert(1)>"
    created = await browser.post("/schedules/new", schedule_form(name=canary))
    assert created.status == 302
    for path in ("/schedules", created.headers["Location"]):
        page = await browser.get(path)
        assert canary not in page.text
        assert "&lt;img src=x onerror=alert(1)&gt;" in page.text


async def test_a_setup_link_sets_the_password_once(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    user = db.write_now(
        create_user,
        email="new@alpha.example",
        tenant_id=alpha.id,
        role="viewer",
        operator=False,
        password_hash=None,
        now=START,
    )
    token = db.write_now(issue_setup_token, user_id=user.id, now=START)
    no_password = await browser.login("new@alpha.example", "")
    assert no_password.status == 401  # no default password, not even an empty one
    form = await browser.get(f"/setup/{token}")
    assert form.status == 200 and "new@alpha.example" in form.text
    short = await browser.post(f"/setup/{token}", {"password": "short", "repeat": "short"})
    assert short.status == 422 and "12 to 1024 characters" in short.text
    done = await browser.post(f"/setup/{token}", {"password": PASSWORD, "repeat": PASSWORD})
    assert done.status == 302 and done.headers["Location"] == "/"  # signed in
    assert (await browser.get(f"/setup/{token}")).status == 404  # used
    assert "new@alpha.example (viewer)" in (await browser.get("/")).text
    signed_in = await Browser(browser.app).login("new@alpha.example", PASSWORD)
    assert signed_in.status == 302


async def test_a_setup_link_expires_after_an_hour(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    user = db.write_now(
        create_user,
        email="late@alpha.example",
        tenant_id=alpha.id,
        role="viewer",
        operator=False,
        password_hash=None,
        now=START,
    )
    token = db.write_now(issue_setup_token, user_id=user.id, now=START)
    clock.advance(3_600_000)
    assert (await browser.get(f"/setup/{token}")).status == 404


async def test_the_cookie_is_secure_over_https_and_forwarded_headers_need_trust(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    over_https = await browser.login(alpha.viewer, scheme="https")
    assert "Secure" in over_https.headers["Set-Cookie"]
    forged = await browser.login(alpha.viewer, headers={"X-Forwarded-Proto": "https"})
    assert forged.status == 302 and "Secure" not in forged.headers["Set-Cookie"]
    behind_proxy = Browser(make_app(db, clock, nudges, trust_proxy=True))
    trusted = await behind_proxy.login(alpha.viewer, headers={"X-Forwarded-Proto": "https"})
    assert trusted.status == 302 and "Secure" in trusted.headers["Set-Cookie"]
