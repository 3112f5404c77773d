"""Authentication (401 with a Bearer challenge) and tenant isolation (another tenant's ids
answer 404, exactly like ids that do not exist, and change nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api, schedule_json

ROUTES = [
    ("POST", "/v1/schedules"),
    ("GET", "/v1/schedules"),
    ("GET", "/v1/schedules/sch_00000000000000000000000000"),
    ("PATCH", "/v1/schedules/sch_00000000000000000000000000"),
    ("DELETE", "/v1/schedules/sch_00000000000000000000000000"),
    ("POST", "/v1/schedules/sch_00000000000000000000000000/pause"),
    ("POST", "/v1/schedules/sch_00000000000000000000000000/resume"),
    ("POST", "/v1/schedules/sch_00000000000000000000000000/trigger"),
    ("GET", "/v1/schedules/sch_00000000000000000000000000/runs"),
    ("GET", "/v1/runs/run_00000000000000000000000000"),
    ("POST", "/v1/runs/run_00000000000000000000000000/replay"),
    ("POST", "/v1/cron/preview"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer stk_wrong", "Basic dXNlcjpwYXNz", "Bearer", "stk_nobearer"],
)
async def test_missing_or_wrong_key_is_401(
    anonymous: Api, method: str, path: str, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    reply = await anonymous.call(method, path, json_body=schedule_json(), headers=headers)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert reply.body["type"] == "urn:steeple:problem:unauthorized"


BAD_INPUTS = [
    ("/v1/schedules", {"limit": "0"}),
    ("/v1/schedules", {"cursor": "not-a-cursor"}),
    ("/v1/schedules/sch_00000000000000000000000000/runs", {"limit": "999"}),
    ("/v1/schedules/sch_00000000000000000000000000/runs", {"cursor": "cnVuOm5vdA"}),  # run:not
]


@pytest.mark.parametrize(("path", "query"), BAD_INPUTS)
@pytest.mark.parametrize("authorization", [None, "Bearer stk_wrong"])
async def test_bad_inputs_without_a_valid_key_answer_401_first(
    anonymous: Api, api: Api, path: str, query: dict[str, str], authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    reply = await anonymous.call("GET", path, headers=headers, query=query)
    assert reply.status == 401
    assert (await api.call("GET", path, query=query)).status == 422


async def test_a_revoked_key_is_401(api: Api, db: Any) -> None:
    def revoke(conn: Any) -> None:
        conn.execute("UPDATE api_keys SET revoked_at = 1 WHERE tenant_id = ?", (api.tenant_id,))

    db.write_now(revoke)
    reply = await api.call("GET", "/v1/schedules")
    assert reply.status == 401
    assert 'error="invalid_token"' in reply.headers["WWW-Authenticate"]


async def test_healthz_needs_no_key(anonymous: Api) -> None:
    reply = await anonymous.call("GET", "/healthz")
    assert reply.status == 200
    assert reply.body == {"status": "ok", "version": "9.9.9-test"}


async def test_another_tenants_ids_answer_404_and_change_nothing(api: Api, other: Api) -> None:
    mine = await api.create()
    run = (await api.call("POST", f"/v1/schedules/{mine['id']}/trigger")).body
    sid, rid = mine["id"], run["id"]
    attempts = [
        ("GET", f"/v1/schedules/{sid}", None),
        ("PATCH", f"/v1/schedules/{sid}", {"name": "hijacked"}),
        ("POST", f"/v1/schedules/{sid}/pause", None),
        ("POST", f"/v1/schedules/{sid}/resume", None),
        ("POST", f"/v1/schedules/{sid}/trigger", None),
        ("GET", f"/v1/schedules/{sid}/runs", None),
        ("GET", f"/v1/runs/{rid}", None),
        ("POST", f"/v1/runs/{rid}/replay", None),
        ("DELETE", f"/v1/schedules/{sid}", None),
    ]
    for method, path, body in attempts:
        reply = await other.call(method, path, json_body=body)
        assert reply.status == 404, (method, path)
        assert reply.body["type"] == "urn:steeple:problem:not-found"
    assert (await other.call("GET", "/v1/schedules")).body["items"] == []
    still = await api.call("GET", f"/v1/schedules/{sid}")
    assert (still.body["name"], still.body["version"], still.body["paused"]) == (
        mine["name"],
        1,
        False,
    )
    runs = (await api.call("GET", f"/v1/schedules/{sid}/runs")).body["items"]
    assert [r["id"] for r in runs] == [rid]
