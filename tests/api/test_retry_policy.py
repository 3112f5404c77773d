"""A schedule's ``retry`` policy through the API: create, read, patch, and precise 422s
that change nothing (docs/schedules.md, "Retry policy")."""

from __future__ import annotations

from typing import Any

import pytest

from appliance.core.retry import ExponentialBackoff, RetryPolicy
from appliance.store.infra.database import Database
from tests.api.conftest import Api, load_schedule, schedule_json

POLICY = {
    "max_attempts": 3,
    "backoff": [1, 1],
    "max_age_seconds": 600,
    "retry_on_status": [503, 429, 503],
}


async def test_a_policy_is_stored_shown_and_applied_from_the_schedule(
    api: Api, db: Database
) -> None:
    created = await api.create(retry=POLICY)
    shown = {**POLICY, "retry_on_status": [429, 503]}
    assert created["retry"] == shown
    reply = await api.call("GET", f"/v1/schedules/{created['id']}")
    assert reply.body["retry"] == shown
    listing = await api.call("GET", "/v1/schedules")
    assert listing.body["items"][0]["retry"] == shown
    stored = load_schedule(db, api.tenant_id, created["id"])
    assert stored.spec.retry == RetryPolicy(
        max_attempts=3,
        backoff=(1, 1),
        window_ms=600_000,
        retry_on_status=frozenset({429, 503}),
    )


async def test_patch_merges_the_policy_key_by_key(api: Api, db: Database) -> None:
    created = await api.create(retry=POLICY)
    path = f"/v1/schedules/{created['id']}"
    reply = await api.call(
        "PATCH",
        path,
        json_body={"retry": {"backoff": {"initial": 2, "factor": 3, "max": 60}}},
    )
    assert reply.status == 200, reply.body
    assert reply.body["retry"] == {
        "max_attempts": 3,
        "backoff": {"initial": 2, "factor": 3.0, "max": 60},
        "max_age_seconds": 600,
        "retry_on_status": [429, 503],
    }
    reply = await api.call(
        "PATCH", path, json_body={"retry": {"non_retryable_status": [400], "max_age_seconds": None}}
    )
    assert reply.status == 200, reply.body
    assert reply.body["retry"] == {
        "max_attempts": 3,
        "backoff": {"initial": 2, "factor": 3.0, "max": 60},
        "max_age_seconds": 604_800,
        "non_retryable_status": [400],
    }
    stored = load_schedule(db, api.tenant_id, created["id"]).spec.retry
    assert stored.backoff == ExponentialBackoff(initial_s=2, factor=3.0, max_s=60)
    assert (stored.retry_on_status, stored.non_retryable_status) == (None, frozenset({400}))
    reply = await api.call("PATCH", path, json_body={"retry": None})
    assert reply.body["retry"] == {
        "max_attempts": 8,
        "backoff": "default",
        "max_age_seconds": 604_800,
    }
    assert load_schedule(db, api.tenant_id, created["id"]).spec.retry == RetryPolicy()


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        ({"backoff": [5, 60, 0]}, "retry.backoff[2]"),
        ({"backoff": {"initial": 5, "factor": 20, "max": 60}}, "retry.backoff.factor"),
        ({"backoff": list(range(1, 16))}, "retry.backoff"),
        ({"max_attempts": 16}, "retry.max_attempts"),
        ({"max_age_seconds": 604_801}, "retry.max_age_seconds"),
        ({"retry_on_status": [500, 600]}, "retry.retry_on_status[1]"),
        ({"non_retryable_status": [404, 201]}, "retry.non_retryable_status[1]"),
        ({"retry_on_status": [500], "non_retryable_status": [400]}, "retry.non_retryable_status"),
    ],
)
async def test_a_bad_policy_is_a_422_naming_the_place_and_changes_nothing(
    api: Api, db: Database, retry: dict[str, Any], field: str
) -> None:
    reply = await api.call("POST", "/v1/schedules", json_body=_with(retry))
    assert reply.status == 422, reply.body
    assert reply.fields == [field]
    assert (await api.call("GET", "/v1/schedules")).body["items"] == []
    created = await api.create(retry=POLICY)
    patched = await api.call("PATCH", f"/v1/schedules/{created['id']}", json_body={"retry": retry})
    assert patched.status == 422, patched.body
    assert field in patched.fields
    after = await api.call("GET", f"/v1/schedules/{created['id']}")
    assert after.body["version"] == created["version"]
    assert after.body["retry"] == created["retry"]


def _with(retry: dict[str, Any]) -> dict[str, Any]:
    return schedule_json(retry=retry)
