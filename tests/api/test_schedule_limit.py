"""A tenant's schedules are limited (``max_schedules_per_tenant``): a create beyond the
limit answers 409 ``schedule-limit`` naming it, with or without an Idempotency-Key, and
deleting a schedule makes room. Other tenants are not affected."""

from __future__ import annotations

import pytest
from quart_trio import QuartTrio

from appliance.core.addresses import AddressPolicy
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from tests.api.conftest import START, Api, FakeClock, Nudges, build_app, schedule_json

LIMIT = 2


@pytest.fixture
def limited_app(db: Database, clock: FakeClock, nudges: Nudges) -> QuartTrio:
    return build_app(db=db, clock=clock, nudges=nudges, policy=AddressPolicy(), max_schedules=LIMIT)


def tenant_api(app: QuartTrio, db: Database, name: str) -> Api:
    tenant = db.write_now(create_tenant, name=name, now=START)
    return Api(app=app, key=tenant.api_key, tenant_id=tenant.tenant_id)


async def test_a_create_beyond_the_limit_is_refused_naming_it(
    limited_app: QuartTrio, db: Database, nudges: Nudges
) -> None:
    api = tenant_api(limited_app, db, "alpha")
    first = await api.create()
    await api.create()
    nudged = nudges.count
    refused = await api.call("POST", "/v1/schedules", json_body=schedule_json())
    assert refused.status == 409
    assert refused.body["type"] == "urn:steeple:problem:schedule-limit"
    assert f"max_schedules_per_tenant = {LIMIT}" in refused.body["detail"]
    assert nudges.count == nudged  # nothing was created
    keyed = await api.call(
        "POST", "/v1/schedules", json_body=schedule_json(), headers={"Idempotency-Key": "k-1"}
    )
    assert keyed.status == 409 and keyed.body["type"].endswith(":schedule-limit")
    listed = await api.call("GET", "/v1/schedules")
    assert len(listed.body["items"]) == LIMIT

    # Another tenant has its own allowance; a delete makes room again.
    await tenant_api(limited_app, db, "beta").create()
    deleted = await api.call("DELETE", f"/v1/schedules/{first['id']}")
    assert deleted.status == 204
    await api.create()
