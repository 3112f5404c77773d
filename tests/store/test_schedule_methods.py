"""A schedule's method in the store (docs/schedules.md, "HTTP methods"), on both stores:
stored and read back, and read with the schedule's URL and headers by every path that
sends or rebuilds a request — a claim, a replay, a resend copy and the curl copy's
parts. A GET's runs hold the empty body."""

from __future__ import annotations

from typing import Any

from appliance.core.addresses import AddressPolicy
from appliance.core.runs import AttemptOutcome, Transition
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import Method
from appliance.store.claims import ClaimedRun, claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.infra.database import Database
from appliance.store.reproduce import run_request
from appliance.store.schedules import create_schedule, get_schedule, update_schedule
from appliance.store.tenants import create_tenant
from appliance.store.usecases.manual import replay_run, trigger_schedule
from appliance.store.usecases.resend import resend_copy
from tests.store.conftest import T0

POLICY = AddressPolicy()


def spec_of(**fields: Any) -> Any:
    document = {"name": "rollup", "cron": "0 3 1 1 *", "target_url": "https://h.example/r"}
    return parse_schedule(document | fields, policy=POLICY)


def claim_one(db: Database, now: int) -> ClaimedRun:
    (run,) = db.write_now(claim_runs, owner="inc_a", now=now, lease_ms=30_000, limit=5).runs
    return run


def succeed(db: Database, run: ClaimedRun, now: int) -> None:
    done = Completion(
        outcome=AttemptOutcome.OK, transition=Transition.SUCCEED, due_at=None,
        failure_reason=None, http_status=200, error=None, latency_ms=1,
        response_excerpt="ok", signed_at=now // 1000,
    )  # fmt: skip
    assert db.write_now(complete_run, run=run, completion=done, now=now)


def test_every_path_reads_the_schedules_method(db: Database) -> None:
    tenant = db.write_now(create_tenant, name="acme", now=T0).tenant_id
    get = db.write_now(create_schedule, tenant_id=tenant, spec=spec_of(method="GET"), now=T0)
    assert db.read_now(get_schedule, tenant_id=tenant, schedule_id=get.id) == get
    assert (get.spec.method, get.spec.body, get.spec.content_type) == (Method.GET, b"", "")

    run, _ = db.write_now(trigger_schedule, tenant_id=tenant, schedule_id=get.id, now=T0 + 1000)
    claimed = claim_one(db, T0 + 1000)
    assert (claimed.run_id, claimed.method, claimed.body) == (run.id, Method.GET, b"")
    succeed(db, claimed, T0 + 1001)
    parts = db.read_now(run_request, tenant_id=tenant, run_id=run.id, as_sent=True, now=T0 + 2000)
    built = parts.build(user_agent="Steeple/test")
    assert (built.method, built.body) == (Method.GET, b"")
    assert "Content-Type" not in dict(built.headers)

    db.write_now(replay_run, tenant_id=tenant, run_id=run.id, now=T0 + 3000)
    assert claim_one(db, T0 + 3000).method is Method.GET
    copy, _ = db.write_now(resend_copy, tenant_id=tenant, run_id=run.id, now=T0 + 4000)
    resent = claim_one(db, T0 + 4000)
    assert (resent.run_id, resent.method, resent.resend_of) == (copy.id, Method.GET, run.id)

    # Changing the method: the next claim reads the schedule's new one (as its URL).
    delete = spec_of(method="DELETE")
    db.write_now(update_schedule, tenant_id=tenant, schedule_id=get.id, spec=delete, now=T0 + 5000)
    db.write_now(trigger_schedule, tenant_id=tenant, schedule_id=get.id, now=T0 + 6000)
    assert claim_one(db, T0 + 6000).method is Method.DELETE


def test_a_body_method_is_stored_and_claimed_with_its_body(db: Database) -> None:
    tenant = db.write_now(create_tenant, name="acme", now=T0).tenant_id
    spec = spec_of(method="PATCH", payload={"n": 1})
    made = db.write_now(create_schedule, tenant_id=tenant, spec=spec, now=T0)
    assert db.read_now(get_schedule, tenant_id=tenant, schedule_id=made.id).spec == made.spec
    db.write_now(trigger_schedule, tenant_id=tenant, schedule_id=made.id, now=T0 + 1000)
    claimed = claim_one(db, T0 + 1000)
    assert (claimed.method, claimed.body, claimed.content_type) == (
        Method.PATCH,
        b'{"n":1}',
        "application/json",
    )
