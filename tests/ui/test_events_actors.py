"""``/events`` names each actor as a reader knows it: a web UI user by email (an operator
too), an API key by its name, the command line as such, the engine's own events as
"engine" — the id kept in the cell's title and a copy button. Another tenant's user or
key is never turned into its email or name, and an actor that is gone shows its id."""

from __future__ import annotations

import html
import re

from quart_trio import QuartTrio

from appliance.core.events import Actor, EventType
from appliance.store.api_keys import list_api_keys
from appliance.store.events import append_event
from appliance.store.infra.database import Database
from appliance.store.users import user_by_email
from tests.api.conftest import START, Api
from tests.ui.conftest import Browser, Tenant
from tests.ui.test_health import add_operator

ACTOR = re.compile(r'<span class="actor" title="([^"]+)">([^<]+)</span>')


def user_id(db: Database, email: str) -> str:
    user = db.read_now(user_by_email, email=email)
    assert user is not None
    return user.id


def shown_actors(text: str) -> list[tuple[str, str]]:
    """(title, visible label) of each actor cell, newest first."""
    return [(title, html.unescape(label)) for title, label in ACTOR.findall(text)]


async def test_actors_are_shown_by_email_or_name_with_their_ids_kept(
    app: QuartTrio, browser: Browser, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    owner = user_id(db, alpha.owner)
    await browser.sign_in(alpha.owner)
    assert (await browser.post("/settings/secrets/rotate", {"overlap_seconds": "0"})).status == 201
    api = Api(app=app, key=alpha.tenant.api_key, tenant_id=alpha.id)
    assert (
        await api.call("POST", "/v1/keys", json_body={"name": "ci", "scope": "read"})
    ).status == 201
    operator = Browser(app)
    await operator.sign_in(add_operator(db))
    await operator.get("/admin/tenants")  # the form's CSRF token
    assert (await operator.post(f"/admin/tenants/{alpha.id}/suspend", {})).status == 302
    assert (await operator.post(f"/admin/tenants/{alpha.id}/resume", {})).status == 302
    ops = user_id(db, "ops@example.com")
    [initial] = [
        k for k in db.read_now(list_api_keys, tenant_id=alpha.id) if k.name == "initial key"
    ]
    stranger = user_id(db, beta.owner)  # another tenant's user named in alpha's feed
    for actor in (Actor.user(stranger), Actor.user("usr_gone"), Actor.operator()):
        db.write_now(
            append_event, tenant_id=alpha.id, type=EventType.SECRET_REVEALED, now=START,
            data={"secret_id": "sec_x", "masked": "whsec_…abcd"}, actor=actor,
        )  # fmt: skip

    await browser.sign_in(alpha.owner)  # the suspension ended the session
    feed = await browser.get("/events")
    assert feed.status == 200
    actors = [(t, label) for t, label in shown_actors(feed.text)]
    assert actors[:3] == [
        ("operator cli", "operator (command line)"),
        ("user usr_gone", "user usr_gone"),
        (f"user {stranger}", f"user {stranger}"),
    ]
    assert beta.owner not in feed.text
    assert (f"user {ops}", "ops@example.com") in actors  # tenant.resumed and .suspended
    assert (f"api_key {initial.id}", "key “initial key”") in actors
    assert (f"user {owner}", alpha.owner) in actors
    # the id stays copyable beside the name; the visible label is never the bare id
    assert f'class="visually-hidden">{owner}</code>' in feed.text
    assert 'aria-label="Copy id of ' + alpha.owner + '"' in feed.text
    assert f">user {owner}<" not in feed.text
