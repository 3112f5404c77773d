"""contracts/openapi/scheduler.yaml is the source of truth (docs/architecture.md): its routes are
exactly the app's, both ways, and its webhooks section documents the whole delivery
contract of core.delivery, with the at-least-once statement."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from quart_trio import QuartTrio

from appliance.core.delivery import CONTRACT_HEADERS
from appliance.core.events import EventType
from appliance.core.instants import format_instant
from tests.api.conftest import Api, deliver_due, schedule_json

SPEC_PATH = Path(__file__).parents[2] / "contracts" / "openapi" / "scheduler.yaml"
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
AT_LEAST_ONCE = (
    "You may receive a request more than once; verify the signature, then deduplicate on "
    "X-Idempotency-Key."
)


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    document = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def spec_routes(spec: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, item in spec["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def app_routes(app: QuartTrio) -> set[tuple[str, str]]:
    routes = set()
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        for method in rule.methods or ():
            if method not in ("HEAD", "OPTIONS"):  # added by the framework to every rule
                routes.add((method, path))
    return routes


def test_the_spec_is_openapi_3_1_with_bearer_security(spec: dict[str, Any]) -> None:
    assert spec["openapi"].startswith("3.1")
    scheme = spec["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert spec["security"] == [{"apiKey": []}]


def test_every_spec_route_is_served_and_every_served_route_is_specified(
    spec: dict[str, Any], app: QuartTrio
) -> None:
    documented, served = spec_routes(spec), app_routes(app)
    assert documented - served == set(), "documented but not served"
    assert served - documented == set(), "served but not documented"


def test_every_operation_documents_its_errors_as_problem_json(spec: dict[str, Any]) -> None:
    responses = spec["components"]["responses"]
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            needs_key = operation.get("security") != []
            if needs_key:
                assert "401" in operation["responses"], (method, path)
            for status, response in operation["responses"].items():
                if not status.startswith(("4", "5")):
                    continue
                if "$ref" in response:
                    response = responses[response["$ref"].rsplit("/", 1)[-1]]
                assert list(response["content"]) == ["application/problem+json"], (
                    method,
                    path,
                    status,
                )


def test_path_parameters_match_the_app(spec: dict[str, Any]) -> None:
    parameters = spec["components"]["parameters"]
    for path, item in spec["paths"].items():
        names = {
            parameters[p["$ref"].rsplit("/", 1)[-1]]["name"] for p in item.get("parameters", [])
        }
        assert names == set(re.findall(r"{(\w+)}", path)), path


def test_webhooks_document_every_delivery_header_and_the_at_least_once_rule(
    spec: dict[str, Any],
) -> None:
    delivery = spec["webhooks"]["scheduleDelivery"]["post"]
    documented = {p["name"] for p in delivery["parameters"] if p["in"] == "header"}
    assert set(CONTRACT_HEADERS) <= documented
    assert AT_LEAST_ONCE in delivery["description"]
    key = next(p for p in delivery["parameters"] if p["name"] == "X-Idempotency-Key")
    assert "SHA-256" in key["description"]
    assert "immediately" in key["description"]
    signature = next(p for p in delivery["parameters"] if p["name"] == "X-Signature")
    assert "v1,<base64>" in signature["description"]
    assert "id.timestamp.body" in signature["description"]


async def test_a_created_schedule_has_every_required_field_of_the_schema(
    spec: dict[str, Any], api: Api
) -> None:
    created = await api.create()
    schedule = spec["components"]["schemas"]["Schedule"]
    assert set(schedule["required"]) <= set(created) <= set(schedule["properties"])
    run = (await api.call("POST", f"/v1/schedules/{created['id']}/trigger")).body
    assert set(spec["components"]["schemas"]["Run"]["required"]) <= set(run)
    full = (await api.call("GET", f"/v1/runs/{run['id']}")).body
    assert set(spec["components"]["schemas"]["Run"]["properties"]) | {"attempts"} == set(full)
    fields = spec["components"]["schemas"]["ScheduleFields"]["properties"]
    response_only = {"id", "version", "created_at", "updated_at", "next_runs", "status", "warnings"}
    assert set(created) - response_only <= set(fields)


def response_schema(
    spec: dict[str, Any], method: str, path: str, status: int
) -> dict[str, Any] | None:
    """The documented JSON schema of one response (None: documented without a body)."""
    responses = spec["paths"][path][method.lower()]["responses"]
    response = responses.get(str(status)) or responses.get(f"{str(status)[0]}XX")
    assert response is not None, f"{method} {path} answered {status}, which is undocumented"
    if "$ref" in response:
        response = spec["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]
    content = response.get("content")
    if not content:
        return None
    ((media_type, body),) = content.items()
    expected = "application/problem+json" if status >= 400 else "application/json"
    assert media_type == expected
    return body["schema"]  # type: ignore[no-any-return]


def check_reply(spec: dict[str, Any], method: str, path: str, status: int, body: Any) -> None:
    schema = response_schema(spec, method, path, status)
    if schema is None:
        assert body is None
        return
    validator = Draft202012Validator({**schema, "components": spec["components"]})
    validator.validate(body)


async def test_every_route_answers_what_the_spec_documents(
    spec: dict[str, Any], api: Api, other: Api, db: Any, clock: Any
) -> None:
    seen: set[tuple[str, str, int]] = set()

    async def call(
        caller: Api, method: str, template: str, expect: int, **kw: Any
    ) -> dict[str, Any]:
        path = template.format(
            schedule_id=ids.get("sch", "x"),
            run_id=ids.get("run", "x"),
            key_id=ids.get("key", "x"),
            secret_id=ids.get("sec", "x"),
        )
        reply = await caller.call(method, path, **kw)
        assert reply.status == expect, (method, path, reply.body)
        check_reply(spec, method, template, reply.status, reply.body)
        seen.add((method, template, reply.status))
        return reply.body  # type: ignore[no-any-return]

    ids: dict[str, str] = {}
    sch, one = "/v1/schedules", "/v1/schedules/{schedule_id}"
    await call(api, "GET", "/healthz", 200)
    await call(api, "GET", "/readyz", 200)
    await call(api, "GET", "/metrics", 403)  # the test client's peer is not loopback
    loopback = {"client": ("127.0.0.1", 40000)}
    scraped = await api.app.test_client().get("/metrics", scope_base=loopback)  # text
    assert (scraped.status_code, scraped.mimetype) == (200, "text/plain")
    ids["sch"] = (await call(api, "POST", sch, 201, json_body=schedule_json()))["id"]
    await call(api, "POST", sch, 201, json_body=schedule_json(headers=[["X-A", "1"]]))
    await call(api, "POST", sch, 422, json_body={"cron": 1})
    await call(api, "POST", sch, 400, data=b"{", headers={"Content-Type": "application/json"})
    await call(api, "POST", sch, 415, data=b"{}")
    batch = "/v1/schedules/batch"
    two = {"schedules": [schedule_json(), schedule_json(cron="0 3 * * *")]}
    await call(api, "POST", batch, 201, json_body=two)
    await call(api, "POST", batch, 422, json_body={"schedules": [schedule_json(), {"cron": 1}]})
    await call(api, "POST", batch, 415, data=b"{}")
    apply, keyed = "/v1/schedules/apply", {**schedule_json(), "key": "contract"}
    await call(api, "POST", apply, 200, json_body={"schedules": [keyed]})
    changed = {"schedules": [{**keyed, "cron": "0 4 * * *"}], "dry_run": True}
    await call(api, "POST", apply, 200, json_body=changed)  # a change, field by field
    await call(api, "POST", apply, 422, json_body={"schedules": [schedule_json()]})
    await call(api, "POST", apply, 415, data=b"{}")
    await call(api, "POST", sch, 413, json_body={"body": "x" * 300_000})
    await call(other, "POST", sch, 401, json_body={}, headers={"Authorization": "Bearer no"})
    await call(api, "GET", sch, 200, query={"limit": "1"})
    await call(api, "GET", sch, 422, query={"limit": "0"})
    await call(api, "GET", one, 200)
    await call(other, "GET", one, 404)
    await call(api, "PATCH", one, 200, json_body={"jitter_seconds": 30})
    await call(api, "PATCH", one, 412, json_body={"name": "n"}, headers={"If-Match": '"1"'})
    await call(api, "PATCH", one, 422, json_body={"nme": "n"})
    await call(api, "POST", one + "/pause", 200)
    await call(api, "POST", one + "/resume", 200)
    await call(api, "POST", one + "/resume", 412, headers={"If-Match": '"1"'})
    ids["run"] = (await call(api, "POST", one + "/trigger", 201))["id"]
    await call(api, "POST", one + "/trigger", 200)
    await call(api, "GET", one + "/runs", 200)
    backfill = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T01:00:00Z"}
    await call(api, "POST", one + "/backfill", 200, json_body={**backfill, "dry_run": True})
    await call(api, "POST", one + "/backfill", 422, json_body={**backfill, "max": 3})
    await call(other, "POST", one + "/backfill", 404, json_body=backfill)
    await call(other, "POST", one + "/dedupe-test", 404)
    await call(api, "POST", one + "/dedupe-test", 422, json_body={"twice": True})
    await call(api, "GET", "/v1/runs/{run_id}", 200)
    await call(api, "POST", "/v1/runs/{run_id}/replay", 409)
    deliver_due(db, now=clock.now)
    await call(api, "GET", "/v1/runs/{run_id}", 200)
    await call(api, "POST", "/v1/runs/{run_id}/replay", 200)
    resend = "/v1/runs/{run_id}/resend"
    await call(api, "POST", resend, 409, json_body={"key": "same"})  # open again: replayed
    await call(api, "POST", resend, 201, json_body={"key": "new"})
    await call(api, "POST", resend, 200, json_body={"key": "new"})  # the same second
    await call(api, "POST", resend, 422, json_body={"key": "again"})
    await call(other, "POST", resend, 404, json_body={"key": "new"})
    curl = "/v1/runs/{run_id}/curl"
    await call(api, "GET", curl, 200, query={"signed": "as_sent"})
    await call(api, "GET", curl, 200)
    await call(api, "GET", curl, 422, query={"signed": "later"})
    await call(other, "GET", curl, 404)
    await call(api, "GET", "/v1/runs", 200, query={"state": "pending", "limit": "1"})
    await call(api, "GET", "/v1/runs", 422, query={"state": "lost", "since": "yesterday"})
    replay = "/v1/runs/replay"
    await call(api, "POST", replay, 409, json_body={"run_ids": [ids["run"]]})
    await call(other, "POST", replay, 404, json_body={"run_ids": [ids["run"]]})
    await call(api, "POST", replay, 422, json_body={"run_ids": []})
    await call(api, "POST", replay, 400, data=b"{", headers={"Content-Type": "application/json"})
    await call(api, "POST", replay, 415, data=b"{}")
    as_of = "2099-01-01T00:00:00Z"
    await call(api, "POST", replay, 422, json_body={"filter": {}, "as_of": as_of})
    deliver_due(db, now=clock.now)
    await call(api, "POST", replay, 200, json_body={"run_ids": [ids["run"]]})
    filtered = {"filter": {"state": ["failed"]}, "as_of": format_instant(clock.now)}
    await call(api, "POST", replay, 200, json_body=filtered)
    await call(api, "POST", "/v1/cron/preview", 200, json_body={"cron": "0 3 * * *"})
    folded = {
        "cron": "30 2 * * *",
        "timezone": "Europe/Berlin",
        "dst": {"fold": "both"},
        "after": "2026-10-24T00:00:00Z",
        "jitter_seconds": 3600,
        "count": 3,
    }  # marks, a description and warnings, each documented
    await call(api, "POST", "/v1/cron/preview", 200, json_body=folded)
    linted = schedule_json(cron="0 0 31 * 5", timezone="Europe/Berlin", dst={"gap": "skip"})
    await call(api, "POST", sch, 201, json_body=linted)
    await call(api, "POST", "/v1/cron/preview", 422, json_body={"cron": "0 3 * *"})
    await call(api, "GET", "/v1/events", 200, query={"type": "schedule.created"})
    await call(api, "GET", "/v1/events", 422, query={"after": "-1"})
    # the stream's 200 is proven over real HTTP (tests/e2e/test_event_stream.py)
    await call(api, "GET", "/v1/events/stream", 422, headers={"Last-Event-ID": "x"})
    keys = "/v1/keys"
    ids["key"] = (await call(api, "POST", keys, 201, json_body={"name": "ci", "scope": "read"}))[
        "id"
    ]
    await call(api, "POST", keys, 422, json_body={"name": "", "scope": "admin"})
    await call(api, "GET", keys, 200)
    reader = Api(
        app=api.app,
        key=(await api.call("POST", keys, json_body={"name": "r", "scope": "read"})).body[
            "api_key"
        ],
    )
    await call(reader, "POST", keys, 403, json_body={"name": "w", "scope": "write"})
    await call(api, "DELETE", "/v1/keys/{key_id}", 204)
    await call(api, "DELETE", "/v1/keys/{key_id}", 404)
    (initial,) = [k for k in (await api.call("GET", keys)).body["items"] if k["scope"] == "write"]
    ids["key"] = initial["id"]
    await call(api, "DELETE", "/v1/keys/{key_id}", 409)
    secrets = "/v1/signing-secrets"
    ids["sec"] = (await call(api, "GET", secrets, 200))["items"][0]["id"]
    await call(api, "DELETE", "/v1/signing-secrets/{secret_id}", 409)
    await call(api, "POST", secrets + "/rotate", 201, json_body={"overlap_seconds": 60})
    await call(api, "POST", secrets + "/rotate", 422, json_body={"overlap_seconds": -1})
    await call(api, "DELETE", "/v1/signing-secrets/{secret_id}", 200)
    await call(api, "DELETE", "/v1/signing-secrets/{secret_id}", 404)
    notify, hook = "/v1/notifications", {"url": "https://hooks.example.com/failures"}
    await call(api, "GET", notify, 404)
    await call(api, "PUT", notify, 422, json_body={"url": "http://127.0.0.1/x"})
    await call(reader, "PUT", notify, 403, json_body=hook)
    await call(api, "PUT", notify, 200, json_body=hook)
    await call(api, "GET", notify, 200)
    await call(api, "DELETE", notify, 204)
    await call(api, "DELETE", notify, 404)
    await call(api, "DELETE", one, 412, headers={"If-Match": '"99"'})
    await call(api, "DELETE", one, 204)
    await call(api, "DELETE", one, 404)
    assert {(m, p) for m, p, _ in seen} == spec_routes(spec)


def test_the_event_types_are_exactly_the_engines(spec: dict[str, Any]) -> None:
    listed = spec["components"]["schemas"]["EventType"]["enum"]
    assert sorted(listed) == sorted(str(t) for t in EventType)
