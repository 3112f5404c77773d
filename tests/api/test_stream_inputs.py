"""Event cursors from the client — ``?after=`` on the API's feed and stream and on the web
UI's events pages, ``Last-Event-ID`` on both streams — are whole numbers from 0 to 2^63-1.
Anything else (too large, 4,301 digits, negative, not a number, other scripts' digits)
answers a 422 naming the parameter, whole, before any stream starts: never a 500, never
a chunked body cut off. Over real HTTP on loopback."""

from __future__ import annotations

import httpx
import pytest
from quart_trio import QuartTrio

from appliance.core.events import MAX_SEQ
from appliance.store.infra.database import Database
from tests.api.conftest import FakeClock, Nudges
from tests.api.loopback import Stream, open_stream, served
from tests.ui.conftest import Tenant, add_tenant, make_app, session_cookie

BAD = [
    "9999999999999999999",  # past 2^63 - 1
    str(MAX_SEQ + 1),
    "9" * 4301,  # more digits than int() parses
    "-1",
    "1e3",
    "abc",
    "１２",  # fullwidth digits: str.isdigit() says yes
    "²",  # a superscript: isdigit() yes, int() no
    " 7",
]


@pytest.fixture
def alpha(db: Database) -> Tenant:
    return add_tenant(db, "alpha")


@pytest.fixture
def app(db: Database, clock: FakeClock, nudges: Nudges) -> QuartTrio:
    return make_app(db, clock, nudges)


def api_key(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.tenant.api_key}"}


def assert_names(answer: Stream | httpx.Response, field: str) -> None:
    """A whole 422 problem document whose only error names ``field``."""
    assert isinstance(answer, httpx.Response), "a stream started"
    assert answer.status_code == 422, answer.text
    assert answer.headers["Content-Type"] == "application/problem+json"
    problem = answer.json()
    assert problem["status"] == 422 and problem["type"] == "urn:steeple:problem:validation"
    assert [error["field"] for error in problem["errors"]] == [field]


@pytest.mark.parametrize("value", BAD)
async def test_a_bad_after_is_a_422_naming_it_on_every_feed_and_stream(
    app: QuartTrio, db: Database, alpha: Tenant, value: str
) -> None:
    cookie = session_cookie(db, alpha.viewer)[1]
    async with served(app) as client:
        for path, headers in (
            ("/v1/events", api_key(alpha)),
            ("/v1/events/stream", api_key(alpha)),
            ("/events/stream", cookie),
        ):
            async with open_stream(client, f"{path}?after={value}", headers) as answer:
                assert_names(answer, "after")
        page = await client.get("/events/new", params={"after": value}, headers=cookie)
        assert page.status_code == 422, page.text  # the UI's error page, naming it
        assert "after" in page.text and "whole number" in page.text


@pytest.mark.parametrize("value", [v for v in BAD if v.isascii() and v.strip() == v])
async def test_a_bad_last_event_id_is_a_422_naming_it_on_both_streams(
    app: QuartTrio, db: Database, alpha: Tenant, value: str
) -> None:
    cookie = session_cookie(db, alpha.viewer)[1]
    async with served(app) as client:
        for path, headers in (("/v1/events/stream", api_key(alpha)), ("/events/stream", cookie)):
            async with open_stream(client, path, headers | {"Last-Event-ID": value}) as answer:
                assert_names(answer, "Last-Event-ID")


async def test_the_largest_seq_is_a_valid_cursor_everywhere(
    app: QuartTrio, db: Database, alpha: Tenant
) -> None:
    cookie = session_cookie(db, alpha.viewer)[1]
    largest = str(MAX_SEQ)
    async with served(app) as client:
        feed = await client.get("/v1/events", params={"after": largest}, headers=api_key(alpha))
        assert feed.status_code == 200 and feed.json() == {"items": [], "next_cursor": MAX_SEQ}
        page = await client.get("/events/new", params={"after": largest}, headers=cookie)
        assert page.status_code == 200, page.text
        for path, headers in (("/v1/events/stream", api_key(alpha)), ("/events/stream", cookie)):
            async with open_stream(client, path, headers | {"Last-Event-ID": largest}) as stream:
                assert isinstance(stream, Stream)
            async with open_stream(client, f"{path}?after={largest}", headers) as stream:
                assert isinstance(stream, Stream)
