"""Isolation, route by route from the OpenAPI file (a new route is covered the day it is
specified): tenant B's key on any of tenant A's ids answers 404 and changes nothing, tenant A's
read key changes nothing anywhere, and a suspended tenant's key is refused everywhere."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from appliance.store.suspension import suspend_tenant
from tests.api.conftest import Api, deliver_due

SPEC = yaml.safe_load(
    (Path(__file__).parents[2] / "contracts" / "openapi" / "scheduler.yaml").read_text("utf-8")
)
METHODS = ("get", "post", "patch", "delete", "put")
ROUTES = [
    (method.upper(), path)
    for path, item in SPEC["paths"].items()
    for method in item
    if method in METHODS and path != "/healthz"
]
BODIES = {"PATCH": {"name": "taken over"}, "POST": {}}
# Routes whose body has required fields: a valid one, so only the id decides the answer.
ROUTE_BODIES = {
    "/v1/schedules/{schedule_id}/backfill": {
        "from": "2026-01-01T00:00:00Z",
        "to": "2026-01-01T01:00:00Z",
        "dry_run": False,
    },
    "/v1/runs/{run_id}/resend": {"key": "new"},
}


async def tenant_a_ids(api: Api, db: Any, clock: Any) -> dict[str, str]:
    schedule = await api.create()
    run = (await api.call("POST", f"/v1/schedules/{schedule['id']}/trigger")).body
    deliver_due(db, now=clock.now)
    key = (await api.call("POST", "/v1/keys", json_body={"name": "k", "scope": "write"})).body
    await api.call("POST", "/v1/signing-secrets/rotate", json_body={"overlap_seconds": 60})
    secret = (await api.call("GET", "/v1/signing-secrets")).body["items"][1]
    return {
        "schedule_id": schedule["id"],
        "run_id": run["id"],
        "key_id": key["id"],
        "secret_id": secret["id"],
    }


async def snapshot(api: Api, ids: dict[str, str]) -> list[Any]:
    """Everything tenant A can see, except what reading itself changes."""
    seen = []
    for path in (
        "/v1/schedules",
        f"/v1/schedules/{ids['schedule_id']}/runs",
        f"/v1/runs/{ids['run_id']}",
        "/v1/signing-secrets",
        "/v1/events",
    ):
        seen.append((await api.call("GET", path)).body)
    keys = (await api.call("GET", "/v1/keys")).body["items"]
    seen.append([{k: v for k, v in key.items() if k != "last_used_at"} for key in keys])
    return seen


@pytest.mark.parametrize(("method", "template"), [r for r in ROUTES if "{" in r[1]])
async def test_another_tenants_ids_are_404_and_change_nothing(
    api: Api, other: Api, db: Any, clock: Any, method: str, template: str
) -> None:
    ids = await tenant_a_ids(api, db, clock)
    before = await snapshot(api, ids)
    path = template.format(**ids)
    body = ROUTE_BODIES.get(template, BODIES.get(method))
    reply = await other.call(method, path, json_body=body)
    assert reply.status == 404, (method, path, reply.body)
    assert await snapshot(api, ids) == before


@pytest.mark.parametrize(
    ("method", "template"), [r for r in ROUTES if r[0] != "GET" and r[1] != "/v1/cron/preview"]
)
async def test_a_read_key_changes_nothing_on_any_write_route(
    api: Api, db: Any, clock: Any, method: str, template: str
) -> None:
    ids = await tenant_a_ids(api, db, clock)
    reader_key = (await api.call("POST", "/v1/keys", json_body={"name": "r", "scope": "read"})).body
    reader = Api(app=api.app, key=reader_key["api_key"])
    before = await snapshot(api, ids)
    path = template.format(**ids)
    reply = await reader.call(method, path, json_body=BODIES.get(method))
    assert reply.status == 403, (method, path, reply.body)
    assert await snapshot(api, ids) == before


def test_the_matrix_covers_every_id_kind_of_the_spec() -> None:
    kinds = {name for _, path in ROUTES for name in re.findall(r"\{(\w+)\}", path)}
    assert kinds == {"schedule_id", "run_id", "key_id", "secret_id"}


@pytest.mark.parametrize(("method", "template"), ROUTES)
async def test_a_suspended_tenants_key_is_refused_on_every_authenticated_route(
    api: Api, anonymous: Api, db: Any, clock: Any, method: str, template: str
) -> None:
    ids = await tenant_a_ids(api, db, clock)
    path = template.format(**ids)
    body = ROUTE_BODIES.get(template, BODIES.get(method))
    if (await anonymous.call(method, path, json_body=body)).status != 401:
        return  # not an API-key route (/readyz, /metrics)
    db.write_now(suspend_tenant, tenant_id=api.tenant_id, now=clock.now)
    reply = await api.call(method, path, json_body=body)
    assert reply.status == 403, (method, path, reply.body)
    assert reply.body is not None and reply.body["type"] == "urn:steeple:problem:tenant-suspended"
