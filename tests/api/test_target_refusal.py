"""A target the network refuses: the tenant's 422 says nothing about the internal network
(no address, no resolution detail); the operator's log says everything."""

from __future__ import annotations

import ipaddress
import json
import logging
from typing import Any

import pytest

from appliance.core.addresses import IPAddress
from tests.api.conftest import Api, schedule_json


@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_a_name_resolving_to_a_private_address_is_refused_without_detail(
    api: Api, dns: dict[str, IPAddress], caplog: pytest.LogCaptureFixture, method: str
) -> None:
    dns["private.test"] = ipaddress.ip_address("10.1.2.3")
    path, body = "/v1/schedules", schedule_json(target_url="https://private.test/hook")
    if method == "PATCH":
        created = await api.create()
        path, body = f"/v1/schedules/{created['id']}", {"target_url": body["target_url"]}
    with caplog.at_level(logging.WARNING):
        reply = await api.call(method, path, json_body=body)
    assert reply.status == 422, reply.body
    [error] = reply.body["errors"]
    assert error["field"] == "target_url"
    assert error["message"].startswith("host 'private.test' does not resolve to a public address")
    text: Any = json.dumps(reply.body)
    assert "10.1.2.3" not in text and "private address" not in text and "RFC 1918" not in text
    assert "private.test resolves to 10.1.2.3, which is a private address (RFC 1918)" in (
        caplog.text
    )
