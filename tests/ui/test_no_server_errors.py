"""No input makes the UI answer 500, and refused input changes nothing: every UI route
(enumerated from the app's ``url_map``, so a new route cannot be left out) gets hostile
values in each path parameter, form field and query parameter, sent by a signed-in
owner (an operator too, for ``/admin``) with a valid CSRF token. An answer of 400 or more
must leave the database as it was.

The table below says which fields each route reads; a second test checks it against the
forms the pages render, so a new field cannot be left out either. On both stores
(``STEEPLE_TEST_DATABASE=postgresql``: a NUL cannot be held in PostgreSQL text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
import trio
from quart_trio import QuartTrio

import appliance.ui
from appliance.core.json_text import MAX_INTEGER_DIGITS
from appliance.store.api_keys import list_api_keys
from appliance.store.infra.database import Database
from appliance.store.tenants import list_signing_secrets
from appliance.store.users import Role, create_user, issue_setup_token
from tests.api.conftest import START
from tests.ui.conftest import _HASH, PASSWORD, Browser, Tenant

HUGE = "9" * (MAX_INTEGER_DIGITS + 1)
NEW_PASSWORD = "a new horse battery"
HOSTILE = (
    HUGE,
    "9223372036854775808",  # 2^63: one past SQLite's integers
    "-9223372036854775809",
    "-1",
    "1.5",
    "1e400",
    "",
    "\x00",
    "a\x00b",
    "\ud800",  # a lone surrogate: sent as its WTF-8 bytes, which are not UTF-8
    "x" * 5000,
    "²",  # str.isdigit() says yes, int() says no
    "[" * 5000,
    f'{{"n": {HUGE}}}',
    "../../etc/passwd",
)
TABLES = (  # what a refused request must leave as it was
    "tenants", "users", "user_setup_tokens", "api_keys", "signing_secrets", "schedules",
    "job_runs", "attempts", "bodies", "events", "request_keys", "notification_targets",
    "notifications",
)  # fmt: skip


@dataclass(frozen=True)
class Route:
    """One UI endpoint: its method, its rule (as the url_map spells it), the form it
    posts (baselines: each field's hostile values replace one field at a time) and the
    query parameters it reads."""

    method: str
    rule: str
    forms: tuple[Mapping[str, str], ...] = ({},)
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    stream: bool = False


SCHEDULE_FORM = {
    "name": "nightly", "kind": "cron", "cron": "0 3 * * *", "at": "", "every": "",
    "timezone": "UTC", "start_at": "", "end_at": "", "dst_gap": "", "dst_fold": "",
    "target_url": "https://hooks.example.com/report", "payload": '{"a": 1}',
    "templated": "", "templated_shown": "1", "max_attempts": "8", "backoff": "default",
    "max_age_seconds": "", "jitter_seconds": "0", "catchup_policy": "latest",
    "overlap": "allow", "form_key": "k" * 43, "key": "", "method": "POST",
}  # fmt: skip
FULL_PREVIEW = {"full_preview": "1", "schedule_id": "{schedule_id}", "version": "1"}
BACK = ("back",)
ROUTES: dict[str, Route] = {
    "ui.static": Route("GET", "/static/<path:filename>"),
    "ui.login_form": Route("GET", "/login", query=("next", "email")),
    "ui.login": Route("POST", "/login", ({"email": "x@a.example", "password": "no"},), ("next",)),
    "ui.logout": Route("POST", "/logout"),
    "ui.setup_form": Route("GET", "/setup/<token>"),
    "ui.setup": Route("POST", "/setup/<token>", ({"password": PASSWORD, "repeat": PASSWORD},)),
    "ui.dashboard": Route("GET", "/", query=("done",)),
    "ui.events": Route("GET", "/events"),
    "ui.new_events": Route("GET", "/events/new", query=("after",)),
    "ui.event_stream": Route(
        "GET", "/events/stream", query=("after",), headers=("Last-Event-ID",), stream=True
    ),
    "ui.guide": Route("GET", "/guide"),
    "ui.list_page": Route("GET", "/schedules", query=("status", "q", "after", "done")),
    "ui.new_form": Route("GET", "/schedules/new"),
    "ui.create": Route("POST", "/schedules/new", (SCHEDULE_FORM,)),
    "ui.preview_page": Route(
        "POST", "/schedules/preview", (SCHEDULE_FORM, FULL_PREVIEW | SCHEDULE_FORM)
    ),
    "ui.schedule_page": Route("GET", "/schedules/<schedule_id>", query=("done",)),
    "ui.edit_form": Route("GET", "/schedules/<schedule_id>/edit"),
    "ui.save": Route(
        "POST",
        "/schedules/<schedule_id>/edit",
        (SCHEDULE_FORM | {"version": "1", "schedule_id": "{schedule_id}"},),
    ),
    "ui.pause": Route("POST", "/schedules/<schedule_id>/pause", ({"note": "n"},), BACK),
    "ui.resume": Route("POST", "/schedules/<schedule_id>/resume", query=BACK),
    "ui.run_now": Route("POST", "/schedules/<schedule_id>/run"),
    "ui.change_selected": Route(
        "POST",
        "/schedules/selected",
        ({"schedule": "{schedule_id}", "action": "pause", "note": ""},),
        BACK,
    ),
    "ui.delete_form": Route("GET", "/schedules/<schedule_id>/delete"),
    "ui.delete": Route("POST", "/schedules/<schedule_id>/delete"),
    "ui.run_page": Route("GET", "/runs/<run_id>"),
    "ui.replay": Route("POST", "/runs/<run_id>/replay"),
    "ui.failed": Route("GET", "/failed", query=("replayed",)),
    "ui.replay_selected": Route("POST", "/failed/replay", ({"run": "{run_id}"},)),
    "ui.confirm_all": Route("GET", "/failed/replay-all"),
    "ui.replay_all": Route("POST", "/failed/replay-all", ({"as_of": "2026-01-01T00:00:00Z"},)),
    "ui.keys": Route("GET", "/settings/keys"),
    "ui.create_key": Route("POST", "/settings/keys", ({"name": "k", "scope": "read"},)),
    "ui.revoke_key": Route("POST", "/settings/keys/<key_id>/revoke"),
    "ui.revoke_form": Route("GET", "/settings/keys/<key_id>/revoke"),
    "ui.secrets": Route("GET", "/settings/secrets"),
    "ui.rotate": Route("POST", "/settings/secrets/rotate", ({"overlap_seconds": "0"},)),
    "ui.reveal": Route("POST", "/settings/secrets/<secret_id>/reveal"),
    "ui.users": Route("GET", "/settings/users"),
    "ui.add_user": Route("POST", "/settings/users", ({"email": "n@a.example", "role": "viewer"},)),
    "ui.set_role": Route("POST", "/settings/users/<user_id>/role", ({"role": "editor"},)),
    "ui.remove": Route("POST", "/settings/users/<user_id>/remove"),
    "ui.remove_form": Route("GET", "/settings/users/<user_id>/remove"),
    "ui.reset": Route("POST", "/settings/users/<user_id>/reset"),
    "ui.account": Route("GET", "/settings/account"),
    "ui.new_password": Route(
        "POST", "/settings/account/password",
        ({"current": PASSWORD, "password": NEW_PASSWORD, "repeat": NEW_PASSWORD},),
    ),
    "ui.end_sessions": Route("POST", "/settings/account/sessions"),
    "ui.notifications": Route("GET", "/settings/notifications", query=("done",)),
    "ui.save_notifications": Route(
        "POST", "/settings/notifications", ({"url": "https://hooks.example.com/n"},)
    ),
    "ui.remove_notifications": Route("POST", "/settings/notifications/remove"),
    "ui.health": Route("GET", "/admin/health"),
    "ui.tenant_list": Route("GET", "/admin/tenants"),
    "ui.add_tenant": Route("POST", "/admin/tenants", ({"name": "gamma"},)),
    "ui.add_tenant_user": Route(
        "POST", "/admin/users", ({"tenant": "alpha", "email": "m@alpha.example", "role": "viewer"},)
    ),
    "ui.suspend_tenant_view": Route("POST", "/admin/tenants/<tenant_id>/suspend"),
    "ui.resume_tenant_view": Route("POST", "/admin/tenants/<tenant_id>/resume"),
}  # fmt: skip
UI_DIR = Path(appliance.ui.__file__).parent
_PARAM = re.compile(r"<(?:[a-z]+:)?([a-z_]+)>")


def ui_endpoints(app: QuartTrio) -> dict[str, tuple[str, frozenset[str]]]:
    return {
        rule.endpoint: (rule.rule, frozenset(rule.methods or ()) - {"HEAD", "OPTIONS"})
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("ui.")
    }


def test_the_table_covers_every_ui_route(app: QuartTrio) -> None:
    assert {e: (r.rule, frozenset({r.method})) for e, r in ROUTES.items()} == ui_endpoints(app)


def test_the_table_covers_every_query_parameter_the_ui_reads() -> None:
    """Every ``request.args`` name in the UI's code is sent hostile somewhere."""
    read = {
        name
        for module in UI_DIR.glob("*.py")
        for name in re.findall(r"request\.args\.get(?:list)?\(\s*\"([^\"]+)\"", module.read_text())
    }
    assert read and read <= {name for route in ROUTES.values() for name in route.query}


@dataclass
class World:
    """A signed-in owner who is also an operator, and one of everything to point at."""

    browser: Browser
    db: Database
    ids: dict[str, str] = field(default_factory=dict)

    def fill(self, text: str) -> str:
        for name, value in self.ids.items():
            text = text.replace("{" + name + "}", value)
        return text


@pytest.fixture
async def world(app: QuartTrio, db: Database, alpha: Tenant) -> World:
    root = "root@alpha.example"
    db.write_now(
        create_user,
        email=root,
        tenant_id=alpha.id,
        role=Role.OWNER,
        operator=True,
        password_hash=_HASH,
        now=START,
    )
    pending = db.write_now(
        create_user,
        email="pending@alpha.example",
        tenant_id=alpha.id,
        role=Role.VIEWER,
        operator=False,
        password_hash=None,
        now=START,
    )
    browser = Browser(app)
    await browser.sign_in(root)
    created = await browser.post("/schedules/new", SCHEDULE_FORM)
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    run = await browser.post(f"/schedules/{schedule_id}/run", {})
    await browser.post("/settings/keys", {"name": "k", "scope": "read"})
    ids = {
        "schedule_id": schedule_id,
        "run_id": run.headers["Location"].split("/")[2].split("?")[0],
        "key_id": db.read_now(list_api_keys, tenant_id=alpha.id)[-1].id,
        "secret_id": db.read_now(list_signing_secrets, tenant_id=alpha.id, now=START)[0].id,
        "tenant_id": alpha.id,
        "token": db.write_now(issue_setup_token, user_id=pending.id, now=START),
        "filename": "steeple.css",
        "user_id": pending.id,
    }
    await browser.get("/")  # the CSRF token, after the posts above
    return World(browser=browser, db=db, ids=ids)


def snapshot(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    def read(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
        return {
            table: [
                tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            ]
            for table in TABLES
        }

    return db.read_now(read)


def _wire(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Variant:
    changed: str  # "form payload", "path schedule_id", "query after"
    value: str
    path: str
    form: dict[str, str]
    query: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)


def variants(route: Route, world: World) -> list[Variant]:
    """Each hostile value in one place at a time, the rest as a valid request has it."""

    def path(**given: str) -> str:
        def one(match: re.Match[str]) -> str:
            return quote(_wire(given.get(match.group(1), world.ids[match.group(1)])), safe="")

        return _PARAM.sub(one, route.rule)

    forms = [{key: world.fill(value) for key, value in base.items()} for base in route.forms]
    found = [
        Variant(f"form {key}", v, path(), form | {key: v}, {})
        for index, form in enumerate(forms)
        for key in (form if index == 0 else set(form) - set(forms[0]))
        for v in HOSTILE
    ]
    for name in _PARAM.findall(route.rule):
        found += [Variant(f"path {name}", v, path(**{name: v}), {}, {}) for v in HOSTILE]
    for name in route.query:
        found += [Variant(f"query {name}", v, path(), forms[0], {name: v}) for v in HOSTILE]
    for name in route.headers:  # what a header can carry: printable Latin-1
        sendable = [v for v in HOSTILE if v.isprintable() and v.isascii()]
        found += [Variant(f"header {name}", v, path(), {}, {}, {name: v}) for v in sendable]
    return found or [Variant("nothing", "", path(), forms[0], {})]


async def send(world: World, route: Route, variant: Variant) -> int:
    client = world.browser.client
    query, form, headers = variant.query, variant.form, variant.headers
    target = variant.path + (
        "?" + urlencode({k: _wire(v) for k, v in query.items()}) if query else ""
    )
    if route.stream:
        return await _stream_status(client, target, headers)
    if route.method == "GET":
        response = await client.get(target, headers=headers)
    else:
        pairs = [(k, _wire(v)) for k, v in form.items()]
        pairs.append(("csrf_token", world.browser.csrf.encode()))
        response = await client.post(
            target,
            data=urlencode(pairs).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
    await response.get_data()
    return int(response.status_code)


async def _stream_status(client: Any, target: str, headers: dict[str, str]) -> int:
    """The status of an answer that may never end: its first chunk, then hang up."""
    with trio.fail_after(30), trio.CancelScope() as scope:
        async with client.request(target, method="GET", headers=headers) as connection:
            await connection.send_complete()
            await connection.receive()
            status = connection.status_code
            scope.cancel()
    return int(status)


@pytest.mark.parametrize("endpoint", list(ROUTES))
async def test_no_input_makes_a_ui_route_answer_500(world: World, endpoint: str) -> None:
    route = ROUTES[endpoint]
    wrong = []
    for variant in variants(route, world):
        before = snapshot(world.db)
        status = await send(world, route, variant)
        if status >= 500 or (status >= 400 and snapshot(world.db) != before):
            wrong.append((variant.changed, repr(variant.value)[:40], status))
    assert wrong == [], "\n".join(map(str, wrong))


class _Forms(HTMLParser):
    """Where a page's POST forms send their fields: each ``<form method="post">``'s
    action and each ``formaction`` of its buttons, with the names it submits (inputs
    bound by ``form="…"`` included)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, set[str], frozenset[str]]] = []  # action, names, own
        self._by_id: dict[str, set[str]] = {}
        self._open: set[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        if tag == "form":
            self._open = set() if a.get("method", "").lower() == "post" else None
            if self._open is not None:
                self.forms.append((a.get("action", ""), self._open, frozenset()))
                self._by_id[a.get("id", "")] = self._open
            return
        names = self._by_id.get(a["form"]) if "form" in a else self._open
        if names is None:
            return
        if "formaction" in a:  # the button's own name goes only where it sends the form
            self.forms.append((a["formaction"], names, frozenset({a.get("name") or ""})))
        elif "name" in a and tag in ("input", "select", "textarea", "button"):
            names.add(a["name"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None


async def test_the_table_names_every_field_the_pages_forms_post(
    app: QuartTrio, world: World
) -> None:
    pages = [
        "/", "/schedules", "/schedules/new", "/schedules/{schedule_id}",
        "/schedules/{schedule_id}/edit", "/schedules/{schedule_id}/delete", "/runs/{run_id}",
        "/failed", "/failed/replay-all", "/settings/keys", "/settings/secrets",
        "/settings/users", "/settings/users/{user_id}/remove", "/settings/account",
        "/settings/notifications", "/admin/tenants", "/events", "/guide",
    ]  # fmt: skip
    adapter = app.url_map.bind("localhost")
    missing: dict[str, set[str]] = {}
    posted = set()
    for page in pages:
        parser = _Forms()
        parser.feed((await world.browser.get(world.fill(page))).text)
        for action, shared, own in parser.forms:
            names = (shared | own) - {""}
            endpoint, _ = adapter.match(urlsplit(action).path, method="POST")
            posted.add(endpoint)
            declared = {key for form in ROUTES[endpoint].forms for key in form}
            missing.setdefault(endpoint, set()).update(names - declared - {"csrf_token"})
    assert {e: n for e, n in missing.items() if n} == {}
    assert len(posted) >= 15  # the pages above post to most routes: the parser sees them
