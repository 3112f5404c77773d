"""The proxy rule (``trust_proxy`` = N): the client is the N-th ``X-Forwarded-For`` entry
from the right. The probe: 30 sign-ins through one proxy, each with a new spoofed
leftmost address, were never throttled; now they hit the per-address limit."""

from __future__ import annotations

from appliance.store.infra.database import Database
from appliance.store.sessions import MAX_FAILURES
from tests.api.conftest import FakeClock, Nudges
from tests.ui.conftest import PASSWORD, Browser, Tenant, make_app

PROXY = {"client": ("127.0.0.1", 50000)}  # the reverse proxy on the same box
CLIENT = "203.0.113.9"


async def test_spoofed_leftmost_addresses_still_hit_the_address_limit(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    browser = Browser(make_app(db, clock, nudges, trust_proxy=1))
    await browser.get("/login")  # its pre-session token
    statuses = []
    for n in range(30):
        reply = await browser.post(
            "/login",
            {"email": f"guess{n}@alpha.example", "password": "wrong"},  # no email limit
            headers={"X-Forwarded-For": f"198.51.100.{n}, {CLIENT}"},
            scope_base=PROXY,
        )
        statuses.append(reply.status)
    assert statuses[:MAX_FAILURES] == [401] * MAX_FAILURES
    assert set(statuses[MAX_FAILURES:]) == {429}
    # The right password from that client is throttled too; another client is not.
    form = {"email": alpha.owner, "password": PASSWORD}
    same = await browser.post("/login", form, headers={"X-Forwarded-For": CLIENT}, scope_base=PROXY)
    other = await browser.post(
        "/login", form, headers={"X-Forwarded-For": "192.0.2.1"}, scope_base=PROXY
    )
    assert (same.status, other.status) == (429, 302)


async def test_two_proxies_take_the_second_entry_from_the_right(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    browser = Browser(make_app(db, clock, nudges, trust_proxy=2))
    await browser.get("/login")  # its pre-session token
    for n in range(MAX_FAILURES + 2):
        last = await browser.post(
            "/login",
            {"email": f"guess{n}@alpha.example", "password": "wrong"},
            headers={"X-Forwarded-For": f"198.51.100.{n}, {CLIENT}, 10.0.0.{n}"},
            scope_base=PROXY,
        )
    assert last.status == 429


async def test_without_trust_the_header_is_ignored(
    db: Database, clock: FakeClock, nudges: Nudges, alpha: Tenant
) -> None:
    browser = Browser(make_app(db, clock, nudges, trust_proxy=0))
    await browser.get("/login")  # its pre-session token
    for n in range(MAX_FAILURES):
        await browser.post(
            "/login",
            {"email": f"guess{n}@alpha.example", "password": "wrong"},
            headers={"X-Forwarded-For": CLIENT},
            scope_base={"client": ("192.0.2.50", 1)},
        )
    elsewhere = await browser.post(
        "/login",
        {"email": alpha.owner, "password": PASSWORD},
        headers={"X-Forwarded-For": CLIENT},
        scope_base={"client": ("192.0.2.51", 1)},
    )
    assert elsewhere.status == 302  # the peer decided, not the forged header


async def test_metrics_are_decided_by_the_client_behind_the_proxy(
    db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    behind = make_app(db, clock, nudges, trust_proxy=1).test_client()
    outside = await behind.get(
        "/metrics", headers={"X-Forwarded-For": "127.0.0.1, 198.51.100.7"}, scope_base=PROXY
    )
    assert outside.status_code == 403  # a spoofed loopback on the left opens nothing
    local = await behind.get("/metrics", headers={"X-Forwarded-For": "::1"}, scope_base=PROXY)
    assert local.status_code == 200
    direct = make_app(db, clock, nudges).test_client()
    forged = await direct.get(
        "/metrics", headers={"X-Forwarded-For": "127.0.0.1"}, scope_base={"client": ("10.9.9.9", 1)}
    )
    assert forged.status_code == 403
