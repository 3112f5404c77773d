"""Errors name the limit they enforce, in the API's own problem+json."""

from __future__ import annotations

from tests.api.conftest import Api


async def test_a_5_mb_body_is_413_naming_the_256_kib_limit(api: Api) -> None:
    reply = await api.call(
        "POST",
        "/v1/schedules",
        data=b"x" * (5 * 1024 * 1024),
        headers={"Content-Type": "application/json"},
    )
    assert reply.status == 413
    assert reply.body["detail"] == "the request body is larger than the limit of 256 KiB"
    assert (await api.call("GET", "/v1/schedules")).body["items"] == []
