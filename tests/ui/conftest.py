"""The web UI served by the real app (API + UI blueprint) on a real SQLite file, driven
through Quart's test client with a cookie jar — a browser without JavaScript. The browser
tests (``test_browser.py``) drive real Chromium against a real appliance process instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

import pytest
from argon2 import PasswordHasher, profiles
from quart_trio import QuartTrio

from appliance.core.addresses import AddressPolicy
from appliance.core.hosts import AllowedHosts
from appliance.live.limits import StreamRegistry
from appliance.store.infra.database import Database
from appliance.store.sessions import start_session
from appliance.store.tenants import NewTenant, create_tenant
from appliance.store.users import Role, create_user, user_by_email
from appliance.ui.app import register_ui
from appliance.ui.context import UiContext
from appliance.ui.hashing import HashingPool
from tests.api.conftest import (
    REPLAY_RATE,
    START,
    FakeClock,
    Nudges,
    build_app,
    make_check_destination,
)

PASSWORD = "correct horse battery staple"


def session_cookie(db: Database, email: str) -> tuple[str, dict[str, str]]:
    """A fresh session of the user ``email``: (its cookie value, the Cookie header)."""
    user = db.read_now(user_by_email, email=email)
    assert user is not None
    token = db.write_now(start_session, user_id=user.id, address="127.0.0.1", now=START)
    return token, {"Cookie": f"steeple_session={token}"}


CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class Page:
    status: int
    text: str
    headers: Any


@dataclass
class Browser:
    """One browser (one cookie jar) on the app."""

    app: QuartTrio
    client: Any = None
    csrf: str = ""

    def __post_init__(self) -> None:
        self.client = self.app.test_client()

    async def get(self, path: str) -> Page:
        response = await self.client.get(path)
        page = Page(response.status_code, await response.get_data(as_text=True), response.headers)
        found = CSRF.search(page.text)
        if found:
            self.csrf = found.group(1)
        return page

    async def post(self, path: str, form: dict[str, Any], *, csrf: bool = True, **kw: Any) -> Page:
        pairs = [  # a list value is one field sent several times, as a browser does
            (key, item)
            for key, value in form.items()
            for item in (value if isinstance(value, list) else [value])
        ]
        if csrf:
            pairs.append(("csrf_token", self.csrf))
        headers = {"Content-Type": "application/x-www-form-urlencoded", **kw.pop("headers", {})}
        response = await self.client.post(
            path, data=urlencode(pairs).encode(), headers=headers, **kw
        )
        return Page(response.status_code, await response.get_data(as_text=True), response.headers)

    async def login(
        self, email: str, password: str = PASSWORD, *, path: str = "/login", **kw: Any
    ) -> Page:
        """The sign-in form fetched (its pre-session cookie and token), then posted."""
        await self.get(path)
        return await self.post(path, {"email": email, "password": password}, **kw)

    async def sign_in(self, email: str, password: str = PASSWORD) -> Page:
        page = await self.login(email, password)
        await self.get("/")  # picks up the session's CSRF token
        return page


@dataclass
class Tenant:
    tenant: NewTenant
    owner: str
    editor: str
    viewer: str

    @property
    def id(self) -> str:
        return self.tenant.tenant_id


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def nudges() -> Nudges:
    return Nudges()


@pytest.fixture
def app(db: Database, clock: FakeClock, nudges: Nudges) -> QuartTrio:
    return make_app(db, clock, nudges)


def make_app(
    db: Database,
    clock: FakeClock,
    nudges: Nudges,
    *,
    trust_proxy: int = 0,
    public_url: str = "",
    allowed_hosts: AllowedHosts | None = None,
    streams: StreamRegistry | None = None,
    passwords: HashingPool | None = None,
) -> QuartTrio:
    policy = AddressPolicy()
    app = build_app(
        db=db,
        clock=clock,
        nudges=nudges,
        policy=policy,
        allowed_hosts=allowed_hosts,
        trust_proxy=trust_proxy,
        streams=streams,
    )
    register_ui(
        app,
        UiContext(
            db=db,
            clock=clock,
            nudge=nudges,
            check_destination=make_check_destination(policy),
            policy=policy,
            replay_rate_per_second=REPLAY_RATE,
            trust_proxy=trust_proxy,
            public_url=public_url,
            event_hub=app.extensions["steeple"].event_hub,  # the API's: one hub
            streams=app.extensions["steeple"].streams,  # and one count of open streams
            passwords=passwords or HashingPool(),
        ),
    )
    return app


# Every test user's stored hash: argon2id at its cheapest. A hash carries its parameters
# and verification reads them from it (appliance/core/passwords.py), so the sign-in code
# under test is the product's while a sign-in costs microseconds, not the tenths of a
# CPU-second RFC 9106's parameters spend (tests/core/test_passwords.py checks those and
# that a weaker hash still verifies). Unknown accounts still check the full-cost dummy.
_HASH = PasswordHasher.from_parameters(profiles.CHEAPEST).hash(PASSWORD)


def add_tenant(db: Database, name: str) -> Tenant:
    tenant = db.write_now(create_tenant, name=name, now=START)
    emails = {}
    for role in Role:
        email = f"{role}@{name}.example"
        db.write_now(
            create_user,
            email=email,
            tenant_id=tenant.tenant_id,
            role=role,
            operator=False,
            password_hash=_HASH,
            now=START,
        )
        emails[str(role)] = email
    return Tenant(tenant=tenant, **emails)


@pytest.fixture
def alpha(db: Database) -> Tenant:
    return add_tenant(db, "alpha")


@pytest.fixture
def beta(db: Database) -> Tenant:
    return add_tenant(db, "beta")


@pytest.fixture
def browser(app: QuartTrio) -> Browser:
    return Browser(app)


def schedule_form(**overrides: str) -> dict[str, str]:
    form = {
        "name": "nightly report",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "target_url": "https://hooks.example.com/report",
        "payload": '{"kind": "report"}',
        "max_attempts": "8",
        "jitter_seconds": "0",
        "catchup_policy": "latest",
        "form_key": "k" * 43,
    }
    form.update(overrides)
    return form


class _FormReader(HTMLParser):
    """The fields one form submits, as a browser without JavaScript sends them: named
    inputs (checked boxes and radios only), the selected option of each select, and
    textareas."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: list[tuple[str, str]] = []
        self._select: str | None = None
        self._textarea: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or ("name" not in a and tag != "option"):
            return
        if tag == "input":
            kind = a.get("type", "text")
            if kind not in ("checkbox", "radio") or "checked" in a:
                self.fields.append((a["name"], a.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select is not None and "selected" in a:
            self.fields.append((self._select, a.get("value", "")))
        elif tag == "textarea":
            self._textarea, self._text = a["name"], []

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            text = "".join(self._text)
            self.fields.append((self._textarea, text[1:] if text.startswith("\n") else text))
            self._textarea = None


def submitted_fields(html: str, form_id: str = "schedule-form") -> dict[str, str]:
    """What submitting the form ``form_id`` of a page as shown sends (but its CSRF token,
    which :meth:`Browser.post` adds)."""
    reader = _FormReader(form_id)
    reader.feed(html)
    reader.close()
    return {name: value for name, value in reader.fields if name != "csrf_token"}
