"""Links the UI hands out (a new user's setup link, the receiver guide's URLs) are built
from ``public_url``, or the address the request arrived on: never from the ``Host``
header, which whoever sends the request writes (a forged one would send a new user's
setup token to the attacker's site)."""

from __future__ import annotations

import re

from appliance.core.hosts import AllowedHosts
from appliance.store.infra.database import Database
from tests.api.conftest import FakeClock, Nudges
from tests.ui.conftest import Browser, Tenant, make_app

FORGED = {"Host": "attacker.example"}
LINK = re.compile(r"(https?://[^\s\"<]+)/setup/[A-Za-z0-9_-]+")


def _browser(db: Database, clock: FakeClock, nudges: Nudges, public_url: str = "") -> Browser:
    # ``*``: the forged Host gets past the allow-list, so the link builder alone is tested.
    app = make_app(db, clock, nudges, public_url=public_url, allowed_hosts=AllowedHosts.of(["*"]))
    return Browser(app)


async def test_a_setup_link_under_a_forged_host_uses_public_url(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    browser = _browser(db, clock, nudges, "https://cron.example.org")
    await browser.sign_in(alpha.owner)
    added = await browser.post(
        "/settings/users", {"email": "new@alpha.example", "role": "viewer"}, headers=FORGED
    )
    assert added.status == 201
    assert {m.group(1) for m in LINK.finditer(added.text)} == {"https://cron.example.org"}
    assert "attacker.example" not in added.text


async def test_without_public_url_links_use_the_listening_address(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    browser = _browser(db, clock, nudges)
    await browser.sign_in(alpha.owner)
    arrived_on = {"server": ("192.0.2.10", 8080)}
    added = await browser.post(
        "/settings/users",
        {"email": "new@alpha.example", "role": "viewer"},
        headers=FORGED,
        scope_base=arrived_on,
    )
    assert {m.group(1) for m in LINK.finditer(added.text)} == {"http://192.0.2.10:8080"}
    guide = await browser.client.get("/guide", headers=FORGED, scope_base=arrived_on)
    text = await guide.get_data(as_text=True)
    assert "http://192.0.2.10:8080/v1/schedules" in text and "attacker.example" not in text


async def test_the_guide_uses_public_url(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    browser = _browser(db, clock, nudges, "https://cron.example.org:8443")
    await browser.sign_in(alpha.editor)
    guide = await browser.client.get("/guide", headers=FORGED)
    text = await guide.get_data(as_text=True)
    assert "https://cron.example.org:8443/v1/schedules" in text
    assert "attacker.example" not in text
