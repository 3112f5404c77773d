"""Owners manage their tenant's users on ``/settings/users`` and everyone their own
account on ``/settings/account`` (docs/ui.md, "People and sign-in"): role changes,
removal (sessions end at once), a fresh setup link (old sessions end), the last owner
kept, one's own password and other sessions; each change an event naming its actor.
The setup page states the password rule and signs the user in."""

from __future__ import annotations

import re

from quart_trio import QuartTrio

from appliance.core.events import Actor
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.suspension import suspend_tenant
from appliance.store.users import Role, User, create_user, get_user, user_by_email
from tests.api.conftest import START, FakeClock
from tests.ui.conftest import _HASH, PASSWORD, Browser, Tenant

LINK = re.compile(r"/setup/([A-Za-z0-9_-]+)")
NEW_PASSWORD = "a brand new horse battery"


def user(db: Database, email: str) -> User:
    found = db.read_now(user_by_email, email=email)
    assert found is not None
    return found


def user_events(db: Database, tenant: Tenant) -> list[tuple[str, dict[str, object], str]]:
    return [
        (str(e.type), dict(e.data), "" if e.actor is None else e.actor.text())
        for e in db.read_now(list_events, tenant_id=tenant.id, limit=100)
        if str(e.type) in {"user.role_changed", "user.removed", "user.reset",
                           "user.password_changed", "user.sessions_ended"}
    ]  # fmt: skip


async def owner_browser(app: QuartTrio, tenant: Tenant) -> Browser:
    browser = Browser(app)
    await browser.sign_in(tenant.owner)
    await browser.get("/settings/users")
    return browser


async def test_the_users_page_changes_a_role_and_shows_last_sign_ins(
    app: QuartTrio, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    owner = await owner_browser(app, alpha)
    viewer = user(db, alpha.viewer)
    listing = await owner.get("/settings/users")
    row = listing.text.split(f'id="user-{viewer.id}"')[1].split("</tr>")[0]
    assert "never" in row  # the viewer never signed in
    assert "2026-" in listing.text.split(f'id="user-{user(db, alpha.owner).id}"')[1][:2000]
    done = await owner.post(f"/settings/users/{viewer.id}/role", {"role": "editor"})
    assert done.status == 200 and f"Role of {alpha.viewer} changed." in done.text
    assert user(db, alpha.viewer).role is Role.EDITOR
    me = Actor.user(user(db, alpha.owner).id).text()
    assert user_events(db, alpha) == [
        ("user.role_changed", {"user_id": viewer.id, "email": alpha.viewer,
                               "role": "editor", "previous_role": "viewer"}, me),
    ]  # fmt: skip
    assert "user.role_changed" in (await owner.get("/events")).text  # in the tenant's feed


async def test_the_last_owner_is_not_demoted_or_removed_and_nothing_changes(
    app: QuartTrio, alpha: Tenant, db: Database
) -> None:
    owner = await owner_browser(app, alpha)
    me = user(db, alpha.owner)
    for path, form in ((f"/settings/users/{me.id}/role", {"role": "viewer"}),
                       (f"/settings/users/{me.id}/remove", {})):  # fmt: skip
        refused = await owner.post(path, form)
        assert refused.status == 409
        assert f"{alpha.owner} is the last owner of this tenant" in refused.text
    assert user(db, alpha.owner) == me and user_events(db, alpha) == []


async def test_removing_a_user_signs_them_out_at_once(
    app: QuartTrio, alpha: Tenant, db: Database
) -> None:
    editor = Browser(app)
    await editor.sign_in(alpha.editor)
    assert (await editor.get("/schedules")).status == 200
    gone = user(db, alpha.editor)
    owner = await owner_browser(app, alpha)
    asked = await owner.get(f"/settings/users/{gone.id}/remove")
    assert asked.status == 200 and "Remove this user?" in asked.text
    assert f"Remove {alpha.editor}</button>" in asked.text
    assert db.read_now(get_user, user_id=gone.id) == gone  # asking changes nothing
    done = await owner.post(f"/settings/users/{gone.id}/remove", {})
    assert done.status == 200 and f"{alpha.editor} removed" in done.text
    assert f'id="user-{gone.id}"' not in done.text
    after = await editor.get("/schedules")
    assert after.status == 302 and after.headers["Location"].startswith("/login")
    assert db.read_now(get_user, user_id=gone.id) is None
    [(kind, data, _)] = user_events(db, alpha)
    assert (kind, data["sessions_ended"]) == ("user.removed", 1)


async def test_a_fresh_setup_link_ends_old_sessions_and_signs_the_user_in(
    app: QuartTrio, alpha: Tenant, db: Database
) -> None:
    editor = Browser(app)
    await editor.sign_in(alpha.editor)
    owner = await owner_browser(app, alpha)
    issued = await owner.post(f"/settings/users/{user(db, alpha.editor).id}/reset", {})
    found = LINK.search(issued.text)
    assert issued.status == 200 and found is not None
    assert (await editor.get("/schedules")).status == 302  # the old session ended
    fresh = Browser(app)
    form = await fresh.get(f"/setup/{found.group(1)}")
    assert "A password is 12 to 1024 characters" in form.text
    assert 'aria-describedby="password-rule"' in form.text
    done = await fresh.post(f"/setup/{found.group(1)}", {"password": NEW_PASSWORD,
                                                         "repeat": NEW_PASSWORD})  # fmt: skip
    assert done.status == 302 and done.headers["Location"] == "/"
    dashboard = await fresh.get("/")
    assert dashboard.status == 200 and alpha.editor in dashboard.text
    assert [k for k, _, _ in user_events(db, alpha)] == ["user.reset"]


async def test_setup_in_a_suspended_tenant_lands_on_the_login_with_the_email(
    app: QuartTrio, alpha: Tenant, db: Database
) -> None:
    owner = await owner_browser(app, alpha)
    issued = await owner.post(f"/settings/users/{user(db, alpha.viewer).id}/reset", {})
    found = LINK.search(issued.text)
    assert found is not None
    db.write_now(suspend_tenant, tenant_id=alpha.id, now=START)
    fresh = Browser(app)
    await fresh.get(f"/setup/{found.group(1)}")
    done = await fresh.post(f"/setup/{found.group(1)}", {"password": NEW_PASSWORD,
                                                         "repeat": NEW_PASSWORD})  # fmt: skip
    location = done.headers["Location"]
    assert done.status == 302 and location.startswith("/login?done=ready&email=")
    login = await fresh.get(location)
    assert f'value="{alpha.viewer}"' in login.text


async def test_only_owners_manage_users_and_forms_need_their_token(
    app: QuartTrio, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    target = user(db, alpha.viewer)
    editor = Browser(app)
    await editor.sign_in(alpha.editor)
    refused = await editor.post(f"/settings/users/{target.id}/remove", {})
    assert refused.status == 403
    owner = await owner_browser(app, alpha)
    forged = await owner.post(f"/settings/users/{target.id}/remove", {}, csrf=False)
    assert forged.status == 403
    beta_owner = user(db, beta.owner)
    for path in (
        f"/settings/users/{beta_owner.id}/remove",
        f"/settings/users/{beta_owner.id}/reset",
    ):
        answer = await (owner.get(path) if path.endswith("remove") else owner.post(path, {}))
        assert answer.status == 404  # another tenant's user is no user here
    assert user(db, beta.owner) == beta_owner
    assert db.read_now(get_user, user_id=target.id) == target


async def test_changing_ones_password_needs_the_current_one_and_ends_other_sessions(
    app: QuartTrio, alpha: Tenant, db: Database
) -> None:
    elsewhere = Browser(app)
    await elsewhere.sign_in(alpha.viewer)
    here = Browser(app)
    await here.sign_in(alpha.viewer)
    page = await here.get("/settings/account")
    assert page.status == 200 and "1 other session is open" in page.text
    assert "A password is 12 to 1024 characters" in page.text
    before = user(db, alpha.viewer)
    wrong = await here.post("/settings/account/password", {
        "current": "not mine", "password": NEW_PASSWORD, "repeat": NEW_PASSWORD})  # fmt: skip
    assert wrong.status == 422 and "is not your current password" in wrong.text
    short = await here.post("/settings/account/password", {
        "current": PASSWORD, "password": "short", "repeat": "short"})  # fmt: skip
    assert short.status == 422 and "12 to 1024 characters" in short.text
    assert user(db, alpha.viewer) == before and user_events(db, alpha) == []
    done = await here.post("/settings/account/password", {
        "current": PASSWORD, "password": NEW_PASSWORD, "repeat": NEW_PASSWORD})  # fmt: skip
    assert done.status == 200 and "Password changed; 1 other session ended." in done.text
    assert (await here.get("/schedules")).status == 200
    assert (await elsewhere.get("/schedules")).status == 302
    again = Browser(app)
    assert (await again.login(alpha.viewer, NEW_PASSWORD)).status == 302
    ended = await here.post("/settings/account/sessions", {})
    assert ended.status == 200 and "1 other session ended." in ended.text
    assert (await again.get("/schedules")).status == 302
    me = Actor.user(before.id).text()
    assert [(k, d["sessions_ended"], a) for k, d, a in user_events(db, alpha)] == [
        ("user.password_changed", 1, me),
        ("user.sessions_ended", 1, me),
    ]


async def test_an_operator_is_shown_as_operator_not_owner(
    app: QuartTrio, alpha: Tenant, db: Database
) -> None:
    db.write_now(
        create_user, email="root@alpha.example", tenant_id=alpha.id, role=Role.OWNER,
        operator=True, password_hash=_HASH, now=START,
    )  # fmt: skip
    root = Browser(app)
    await root.sign_in("root@alpha.example")
    page = await root.get("/settings/users")
    assert "root@alpha.example (operator)" in page.text
    row = page.text.split(f'id="user-{user(db, "root@alpha.example").id}"')[1].split("</tr>")[0]
    assert "<td>operator</td>" in row.replace("\n", "").replace("    ", "")
    account = await root.get("/settings/account")
    assert "(operator)" in account.text and "(owner)" not in account.text
