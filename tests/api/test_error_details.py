"""Errors name the limit they enforce, in the API's own problem+json; the README's examples
answer what it says they answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

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
