"""Caps on open live streams over real HTTP on loopback: per API key, per UI session, per
tenant and per process (one count for both surfaces), a 429 problem naming the limit, the
slot given back however the stream ends, and ``steeple_open_streams``."""

from __future__ import annotations

import functools
from contextlib import AsyncExitStack
from typing import Any

import httpx
import yaml
from jsonschema import Draft202012Validator
from prometheus_client.parser import text_string_to_metric_families
from referencing import Registry, Resource

from appliance.live.limits import StreamLimits, StreamRegistry, Surface
from appliance.settings.load import load_settings
from appliance.store.api_keys import Scope, insert_api_key
from appliance.store.infra.database import Database
from appliance.wiring.http import stream_limits
from tests.api.conftest import START, FakeClock, Nudges
from tests.api.loopback import Stream, open_stream, served, wait_until
from tests.api.test_openapi_contract import SPEC_PATH
from tests.test_event_schemas import SCHEMAS
from tests.ui.conftest import Tenant, add_tenant, make_app, session_cookie

API = "/v1/events/stream"
UI = "/events/stream"
LIMITS = StreamLimits(per_key=2, per_session=1, per_tenant=3, per_process=4)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def second_key(db: Database, tenant: Tenant) -> str:
    issued = db.write_now(
        insert_api_key, tenant_id=tenant.id, name="second", scope=Scope.READ, now=START
    )
    return issued.api_key


def assert_refused(answer: Stream | httpx.Response, limit: str) -> None:
    assert isinstance(answer, httpx.Response), "the stream was admitted"
    assert answer.status_code == 429, answer.text
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert int(answer.headers["Retry-After"]) > 0
    problem = answer.json()
    assert problem["type"] == "urn:steeple:problem:stream-limit"
    assert problem["status"] == 429 and problem["limit"] == limit
    assert f"max_streams_per_{limit}" in problem["detail"] or limit == "process"
    if limit != "session":  # the API's answers are the spec's (a session is the UI's)
        documented().validate(problem)


@functools.cache
def documented() -> Draft202012Validator:
    """The spec's schema of the 429 (the spec is read once: it is large)."""
    spec = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    content = spec["components"]["responses"]["TooManyStreams"]["content"]
    schema = content["application/problem+json"]["schema"]
    return Draft202012Validator({**schema, "components": spec["components"]})


async def open_streams(client: httpx.AsyncClient) -> dict[str, float]:
    """``steeple_open_streams`` by surface, scraped over loopback."""
    scraped = await client.get("/metrics")
    assert scraped.status_code == 200, scraped.text
    (family,) = [
        f for f in text_string_to_metric_families(scraped.text) if f.name == "steeple_open_streams"
    ]
    return {s.labels["surface"]: s.value for s in family.samples}


async def test_each_limit_refuses_the_stream_beyond_it_and_names_itself(
    db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    alpha, beta = add_tenant(db, "alpha"), add_tenant(db, "beta")
    registry = StreamRegistry(limits=LIMITS)
    app = make_app(db, clock, nudges, streams=registry)
    key, other_key = alpha.tenant.api_key, second_key(db, alpha)
    async with served(app) as client, AsyncExitStack() as held:

        async def attempt(path: str, headers: dict[str, str]) -> Stream | httpx.Response:
            return await held.enter_async_context(open_stream(client, path, headers))

        assert isinstance(await attempt(API, bearer(key)), Stream)
        assert isinstance(await attempt(API, bearer(key)), Stream)
        assert_refused(await attempt(API, bearer(key)), "key")
        assert isinstance(
            await attempt(UI, session_cookie(db, alpha.viewer)[1]), Stream
        )  # alpha: 3
        assert_refused(await attempt(API, bearer(other_key)), "tenant")
        assert await open_streams(client) == {"api": 2, "ui": 1}
        session = session_cookie(db, beta.viewer)[1]
        assert isinstance(await attempt(UI, session), Stream)
        assert_refused(await attempt(UI, session), "session")  # and the process is full:
        assert_refused(await attempt(API, bearer(beta.tenant.api_key)), "process")
        assert registry.open_streams() == {Surface.API: 2, Surface.UI: 2}
    assert registry.open_streams() == {Surface.API: 0, Surface.UI: 0}  # shutdown ended all


async def test_a_stream_whose_client_leaves_gives_its_slot_back(
    db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    alpha = add_tenant(db, "alpha")
    registry = StreamRegistry(limits=StreamLimits(per_key=1))
    app = make_app(db, clock, nudges, streams=registry)
    key = bearer(alpha.tenant.api_key)
    async with served(app) as client:
        for _ in range(3):  # each time the client leaves, the next stream is admitted
            async with open_stream(client, API, key) as first:
                assert isinstance(first, Stream)
                async with open_stream(client, API, key) as second:
                    assert_refused(second, "key")
            await wait_until(lambda: registry.open_streams()[Surface.API] == 0)


def test_the_registry_defaults_are_the_settings_defaults() -> None:
    settings = load_settings(environ={})
    assert stream_limits(settings) == StreamLimits()
    assert (settings.max_streams_per_key, settings.max_streams_per_session) == (4, 4)
    assert (settings.max_streams_per_tenant, settings.max_streams) == (16, 256)
    small = load_settings(environ={"STEEPLE_MAX_STREAMS_PER_KEY": "1", "STEEPLE_MAX_STREAMS": "9"})
    assert stream_limits(small) == StreamLimits(per_key=1, per_process=9)


async def refusals(client: httpx.AsyncClient, key: dict[str, str]) -> list[dict[str, Any]]:
    """The tenant's ``stream.refused`` events, as ``GET /v1/events`` renders them."""
    feed = await client.get("/v1/events", params={"type": "stream.refused"}, headers=key)
    assert feed.status_code == 200, feed.text
    items: list[dict[str, Any]] = feed.json()["items"]
    return items


def assert_valid_event(event: dict[str, Any]) -> None:
    resources = [(s["$id"], Resource.from_contents(s)) for s in SCHEMAS.values()]
    registry = Registry().with_resources(resources)  # type: ignore[var-annotated]
    for name in ("envelope", event["type"]):
        Draft202012Validator(SCHEMAS[name], registry=registry).validate(event)


async def test_a_burst_of_refusals_is_one_stream_refused_per_tenant_and_limit_a_minute(
    db: Database, clock: FakeClock, nudges: Nudges
) -> None:
    alpha = add_tenant(db, "alpha")
    registry = StreamRegistry(limits=StreamLimits(per_key=1, per_session=1))
    app = make_app(db, clock, nudges, streams=registry)
    key, cookie = bearer(alpha.tenant.api_key), session_cookie(db, alpha.viewer)[1]
    async with (
        served(app) as client,
        open_stream(client, API, key) as api_stream,
        open_stream(client, UI, cookie) as ui_stream,
    ):
        assert isinstance(api_stream, Stream) and isinstance(ui_stream, Stream)
        for path, headers, limit in ((API, key, "key"), (UI, cookie, "session")):
            for _ in range(25):
                async with open_stream(client, path, headers) as refused:
                    assert_refused(refused, limit)
        first = await refusals(client, key)
        assert [(e["data"]["surface"], e["data"]["limit"]) for e in first] == [
            ("api", "key"),
            ("ui", "session"),
        ]
        assert first[0]["data"]["max"] == 1 and first[0]["actor"]["kind"] == "api_key"
        assert first[1]["actor"]["kind"] == "user"
        for event in first:
            assert_valid_event(event)
        clock.advance(59_999)
        async with open_stream(client, API, key) as refused:
            assert_refused(refused, "key")
        assert len(await refusals(client, key)) == 2  # still within the minute
        clock.advance(1)
        async with open_stream(client, API, key) as refused:
            assert_refused(refused, "key")
        assert len(await refusals(client, key)) == 3  # a minute on: one more
        await api_stream.wait_for(lambda s: len(s.ids) == 3)  # the open stream saw them
