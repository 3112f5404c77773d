"""Suspending a tenant (operator page, CLI, store): its keys answer 403 problem+json
naming the suspension, its users cannot sign in and their sessions stop working, its open
runs are cancelled; resuming restores all of it. (The planner's side is in
tests/engine/test_planner.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from quart_trio import QuartTrio

from appliance.cli.main import main
from appliance.core.events import Actor, EventType
from appliance.core.instants import format_instant
from appliance.core.runs import AttemptOutcome, RunState, Transition
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.events import list_events
from appliance.store.figures.tenants import tenant_summaries
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.runs import get_run
from appliance.store.schedules import get_schedule
from appliance.store.suspension import suspend_tenant, suspended_since
from appliance.store.users import user_by_email
from appliance.ui.signin import GENERIC_ERROR
from tests.api.conftest import START, Api, FakeClock, plan_runs
from tests.ui.conftest import Browser, Tenant, schedule_form
from tests.ui.test_health import add_operator


async def test_an_operator_suspends_and_resumes_a_tenant(
    app: QuartTrio, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    api = Api(app=app, key=alpha.tenant.api_key, tenant_id=alpha.id)
    other = Api(app=app, key=beta.tenant.api_key, tenant_id=beta.id)
    assert (await api.call("GET", "/v1/schedules")).status == 200
    member = Browser(app)
    await member.sign_in(alpha.viewer)
    assert (await member.get("/schedules")).status == 200

    operator = Browser(app)
    await operator.sign_in(add_operator(db))
    listing = await operator.get("/admin/tenants")
    assert f'action="/admin/tenants/{alpha.id}/suspend"' in listing.text
    assert (await operator.post(f"/admin/tenants/{alpha.id}/suspend", {}, csrf=False)).status == 403
    done = await operator.post(f"/admin/tenants/{alpha.id}/suspend", {})
    assert done.status == 302 and db.read_now(suspended_since, tenant_id=alpha.id) is not None

    for method, path in (("GET", "/v1/schedules"), ("POST", "/v1/schedules")):
        refused = await api.call(method, path, json_body={})
        assert refused.status == 403 and refused.body is not None
        assert refused.body["type"] == "urn:steeple:problem:tenant-suspended"
        assert "suspended" in refused.body["detail"]
    assert (await other.call("GET", "/v1/schedules")).status == 200  # only alpha
    session_page = await member.get("/schedules")
    assert session_page.status == 302 and session_page.headers["Location"].startswith("/login")
    again = await Browser(app).sign_in(alpha.owner)
    assert again.status == 401 and GENERIC_ERROR in again.text
    listing = await operator.get("/admin/tenants")
    assert "suspended</strong>" in listing.text
    assert f'action="/admin/tenants/{alpha.id}/resume"' in listing.text

    resumed = await operator.post(f"/admin/tenants/{alpha.id}/resume", {})
    assert resumed.status == 302 and db.read_now(suspended_since, tenant_id=alpha.id) is None
    assert (await api.call("GET", "/v1/schedules")).status == 200
    assert (await Browser(app).sign_in(alpha.owner)).status == 302


async def test_suspend_and_resume_are_events_in_the_tenants_feed_naming_the_operator(
    app: QuartTrio, alpha: Tenant, beta: Tenant, db: Database, clock: FakeClock
) -> None:
    member = Browser(app)
    await member.sign_in(alpha.editor)
    schedule_id = (
        (await member.post("/schedules/new", schedule_form(cron="* * * * * *")))
        .headers["Location"]
        .split("/")[2]
        .split("?")[0]
    )
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert schedule is not None
    plan_runs(db, schedule, after=START, count=3)
    operator = Browser(app)
    await operator.sign_in(add_operator(db))
    ops = db.read_now(user_by_email, email="ops@example.com")
    assert ops is not None
    await operator.get("/admin/tenants")  # its CSRF token
    suspended_at = clock.now
    await operator.post(f"/admin/tenants/{alpha.id}/suspend", {})
    await operator.post(f"/admin/tenants/{alpha.id}/suspend", {})  # already: no event
    clock.advance(60_000)
    await operator.post(f"/admin/tenants/{alpha.id}/resume", {})
    await operator.post(f"/admin/tenants/{alpha.id}/resume", {})  # already: no event
    feed = [
        e
        for e in db.read_now(list_events, tenant_id=alpha.id)
        if e.type in (EventType.TENANT_SUSPENDED, EventType.TENANT_RESUMED)
    ]
    assert [(e.type, e.data, e.actor, e.occurred_at) for e in feed] == [
        (EventType.TENANT_SUSPENDED, {"cancelled_runs": 3}, Actor.user(ops.id), suspended_at),
        (
            EventType.TENANT_RESUMED,
            {"suspended_at": format_instant(suspended_at)},
            Actor.user(ops.id),
            clock.now,
        ),
    ]
    assert all(e.tenant_id == alpha.id and e.schedule_id is None for e in feed)
    assert (
        not [  # beta's feed has none of it
            e for e in db.read_now(list_events, tenant_id=beta.id) if e.type.startswith("tenant.")
        ]
    )
    page = await member.get("/events")  # the tenant reads it in its own feed
    assert "tenant.suspended" in page.text and "tenant.resumed" in page.text


async def test_tenant_users_cannot_suspend(browser: Browser, alpha: Tenant, db: Database) -> None:
    await browser.sign_in(alpha.owner)
    assert (await browser.post(f"/admin/tenants/{alpha.id}/suspend", {})).status == 404
    assert db.read_now(suspended_since, tenant_id=alpha.id) is None


def test_the_cli_suspends_and_resumes_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["tenant", "create", "acme", *data]) == 0
    tenant_id = json.loads(capsys.readouterr().out)["tenant_id"]
    assert main(["tenant", "suspend", "acme", *data]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "id": tenant_id,
        "state": "suspended",
        "runs_cancelled": 0,
    }
    assert main(["tenant", "suspend", tenant_id, *data]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "already suspended"
    db = Database.open(tmp_path / "steeple.db")
    try:
        (summary,) = db.read_now(tenant_summaries, now=START)
        assert summary.suspended_at is not None
    finally:
        db.close()
    assert main(["tenant", "resume", "acme", *data]) == 0
    assert json.loads(capsys.readouterr().out) == {"id": tenant_id, "state": "resumed"}
    assert main(["tenant", "resume", "nobody", *data]) != 0
    db = Database.open(tmp_path / "steeple.db")
    try:  # the command line names itself, as for key, secret and user changes
        feed = db.read_now(list_events, tenant_id=tenant_id)
    finally:
        db.close()
    assert [(str(e.type), e.actor) for e in feed] == [
        ("tenant.suspended", Actor.operator()),
        ("tenant.resumed", Actor.operator()),
    ]


async def test_a_delivery_in_flight_at_suspension_gets_no_retry(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form(cron="* * * * * *"))
    schedule = db.read_now(
        get_schedule,
        tenant_id=alpha.id,
        schedule_id=created.headers["Location"].split("/")[2].split("?")[0],
    )
    assert schedule is not None
    plan_runs(db, schedule, after=START, count=2)
    clock.advance(1500)  # the first is due, the second planned ahead
    owner = db.write_now(register_incarnation, pid=1, now=clock.now)
    (claimed,) = db.write_now(
        claim_runs, owner=owner, now=clock.now, lease_ms=60_000, limit=10
    ).runs
    assert db.write_now(suspend_tenant, tenant_id=alpha.id, now=clock.now + 1) == 1
    retry = Completion(
        outcome=AttemptOutcome.RETRYABLE,
        transition=Transition.RETRY,
        due_at=clock.now + 60_000,
        failure_reason=None,
        http_status=503,
        error="HTTP 503",
        latency_ms=5,
        response_excerpt="busy",
    )
    assert db.write_now(complete_run, run=claimed, completion=retry, now=clock.now + 5)
    run = db.read_now(get_run, tenant_id=alpha.id, run_id=claimed.run_id)
    assert run is not None and run.state is RunState.CANCELLED
