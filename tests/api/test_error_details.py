"""Errors name the limit they enforce, in the API's own problem+json; the README's examples
answer what it says they answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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


async def test_the_readme_dst_preview_answers_what_the_readme_says(api: Api) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    body = json.loads(re.search(r"-d '(\{\"cron\": \"30 2.*?\})'", readme, re.S)[1])  # type: ignore[index]
    reply = await api.call("POST", "/v1/cron/preview", json_body=body)
    said = re.findall(r"`(2027-03-1\dT[0-9:]+Z)`", readme)
    assert [o["scheduled_for"] for o in reply.body["occurrences"]] == said


@pytest.mark.parametrize(
    ("if_match", "status"),
    [("", 400), ('"1", "2"', 400), ("1", 400), ('W/"1"', 412), ('"x"', 412), ('"1"', 200)],
)
async def test_if_match_is_one_entity_tag_else_400(api: Api, if_match: str, status: int) -> None:
    created = await api.create()
    reply = await api.call(
        "POST", f"/v1/schedules/{created['id']}/pause", headers={"If-Match": if_match}
    )
    assert reply.status == status, reply.body


async def test_json_schema_integers_may_be_written_with_a_zero_fraction(api: Api) -> None:
    created = await api.create(timeout_seconds=30.0)
    assert created["timeout_seconds"] == 30
    preview = await api.call(
        "POST", "/v1/cron/preview", json_body={"cron": "0 3 * * *", "count": 2.0}
    )
    assert preview.status == 200 and len(preview.body["occurrences"]) == 2


async def test_an_empty_preview_after_is_422_not_now(api: Api) -> None:
    reply = await api.call("POST", "/v1/cron/preview", json_body={"cron": "0 3 * * *", "after": ""})
    assert reply.status == 422 and reply.fields == ["after"]
