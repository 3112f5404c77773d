"""Sign-ins are audit events in the tenant's own feed (``user.signed_in``,
``user.sign_in_failed``), never carrying the password; a failure at an email no tenant's
user has is told to the operator's log only, at most a line and a count a minute; the
throttle bounds the failures recorded. Stored events are checked against
``contracts/events``."""

from __future__ import annotations

import json
import logging

import pytest

from appliance.core.events import ActorKind, Event, EventType
from appliance.store.events import events_after, list_events
from appliance.store.infra.database import Database
from appliance.store.sessions import MAX_FAILURES
from tests.api.conftest import FakeClock
from tests.engine.conftest import stored_events
from tests.ui.conftest import PASSWORD, Browser, Tenant

WRONG = "not the password, no"
SIGN_IN = {EventType.USER_SIGNED_IN, EventType.USER_SIGN_IN_FAILED}


def sign_ins(db: Database, tenant: Tenant) -> list[Event]:
    return [
        e for e in db.read_now(list_events, tenant_id=tenant.id, limit=1000) if e.type in SIGN_IN
    ]


def all_events_match_the_contracts(db: Database) -> None:
    for wire, validator in stored_events(db):
        assert [error.message for error in validator.iter_errors(wire)] == [], wire


async def test_a_sign_in_and_a_failure_are_events_in_the_users_tenant_only(
    browser: Browser, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    assert (await browser.login(alpha.editor, WRONG)).status == 401
    assert (await browser.login(alpha.editor)).status == 302
    failed, signed_in = sign_ins(db, alpha)
    assert failed.type == EventType.USER_SIGN_IN_FAILED and failed.actor is None
    assert failed.data["email"] == alpha.editor and failed.data["reason"] == "wrong_password"
    assert failed.data["address"]
    assert signed_in.type == EventType.USER_SIGNED_IN
    assert signed_in.actor is not None and signed_in.actor.kind == ActorKind.USER
    assert signed_in.actor.id == signed_in.data["user_id"] == failed.data["user_id"]
    assert sign_ins(db, beta) == []
    everything = json.dumps([e.data for e in db.read_now(events_after, after=0, limit=1000)])
    assert WRONG not in everything and PASSWORD not in everything
    all_events_match_the_contracts(db)
    owner = Browser(browser.app)
    await owner.sign_in(alpha.owner)
    feed = await owner.get("/events")  # the tenant's own feed shows them
    assert "user.sign_in_failed" in feed.text and "user.signed_in" in feed.text


async def test_a_failure_at_an_unknown_email_goes_to_the_operator_log_only(
    browser: Browser,
    alpha: Tenant,
    db: Database,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="appliance.ui.signin")
    for _ in range(3):
        assert (await browser.login("who@nowhere.example", WRONG)).status == 401
    clock.advance(60_000)
    assert (await browser.login("who@nowhere.example", WRONG)).status == 401
    assert sign_ins(db, alpha) == []
    assert all(e.type not in SIGN_IN for e in db.read_now(events_after, after=0, limit=1000))
    lines = [r.getMessage() for r in caplog.records if r.name == "appliance.ui.signin"]
    first = "failed sign-in at an email of no tenant's user, from "  # then the client's address
    assert [line.startswith(first) for line in lines] == [True, False, True]
    assert lines[1] == "2 more failed sign-ins at emails of no tenant's user in the minute"
    assert not any("nowhere" in line or WRONG in line for line in lines)


async def test_the_throttle_bounds_the_failures_recorded(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    for _ in range(3 * MAX_FAILURES):
        await browser.login(alpha.owner, WRONG)
    assert (await browser.login(alpha.owner)).status == 429
    recorded = sign_ins(db, alpha)
    assert [e.type for e in recorded] == [EventType.USER_SIGN_IN_FAILED] * MAX_FAILURES
