"""A NUL in a path segment names nothing (404), in a query parameter it is a 422 naming
it, on both stores: a PostgreSQL text cannot hold one, and the lookup used to fail there
as a database error (503) where SQLite answered 404."""

from __future__ import annotations

import pytest

from .conftest import Api


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/schedules/%00"),
        ("PATCH", "/v1/schedules/sch_%00"),
        ("POST", "/v1/schedules/a%00b/pause"),
        ("GET", "/v1/runs/%00"),
        ("DELETE", "/v1/keys/key_%00"),
    ],
)
async def test_an_id_holding_a_nul_names_nothing(api: Api, method: str, path: str) -> None:
    reply = await api.call(method, path)
    assert reply.status == 404, reply.body


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/schedules/x/runs?limit=%00", "limit"),
        ("/v1/events?after=1%00", "after"),
        ("/v1/runs?state=failed&q%00=1", "q\\x00"),
    ],
)
async def test_a_query_parameter_holding_a_nul_is_a_422_naming_it(
    api: Api, path: str, field: str
) -> None:
    reply = await api.call("GET", path)
    assert reply.status == 422, reply.body
    assert reply.fields == [field]
