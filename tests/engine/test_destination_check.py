"""The write-time destination check: static rules first, then every resolved address, and
what the network said goes to the operator's log, never to the tenant."""

from __future__ import annotations

import ipaddress
import logging

import pytest
import trio

from appliance.core.addresses import AddressPolicy, IPAddress
from appliance.engine.delivery import check_destination
from appliance.engine.delivery.connect import resolve_host
from appliance.errors import ValidationError
from tests.engine.loopback import LOOPBACK_ALLOWED, OPEN, fake_dns

GENERIC = (
    "does not resolve to a public address that Steeple may deliver to; check the name, or "
    "ask the operator to allow it with --allow-target (the appliance's log says why it was "
    "refused)"
)


def field_message(caught: pytest.ExceptionInfo[ValidationError]) -> str:
    [error] = caught.value.errors
    assert error.field == "target_url"
    return error.message


async def test_a_name_resolving_to_a_private_address_gets_a_generic_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dns = fake_dns({"private.test": ["10.1.2.3"], "hooks.example": ["93.184.215.14"]})
    with caplog.at_level(logging.WARNING), pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "https://private.test/x", resolve=dns)
    message = field_message(caught)
    assert message == f"host 'private.test' {GENERIC}"
    assert "10.1.2.3" not in message and "private address" not in message
    assert "private.test resolves to 10.1.2.3, which is a private address (RFC 1918)" in (
        caplog.text
    )
    await check_destination(OPEN, "https://hooks.example/x", resolve=dns)
    await check_destination(AddressPolicy.parse(["10.0.0.0/8"]), "https://private.test/x",
                            resolve=dns)  # fmt: skip


async def test_a_name_that_does_not_resolve_gets_the_same_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "https://nowhere.example/", resolve=fake_dns({}))
    assert field_message(caught) == f"host 'nowhere.example' {GENERIC}"
    assert "could not resolve host 'nowhere.example'" in caplog.text


async def test_a_slow_lookup_fails_closed(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def stuck(host: str) -> list[IPAddress]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    with caplog.at_level(logging.WARNING), pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "https://slow.example/", resolve=stuck)
    assert field_message(caught) == f"host 'slow.example' {GENERIC}"
    assert "took longer than 5 s" in caplog.text


async def test_static_rules_come_first_and_speak_plainly() -> None:
    """What the tenant typed (an IP literal) is judged in words; nothing is looked up."""
    with pytest.raises(ValidationError) as caught:
        await check_destination(OPEN, "http://127.0.0.1:8000/", resolve=fake_dns({}))
    assert "127.0.0.1 is a loopback address" in field_message(caught)
    await check_destination(LOOPBACK_ALLOWED, "http://127.0.0.1:8000/", resolve=fake_dns({}))


async def test_the_normalised_name_is_the_one_looked_up() -> None:
    looked_up: list[str] = []

    async def resolve(host: str) -> list[IPAddress]:
        looked_up.append(host)
        return await fake_dns({"xn--bcher-kva.example": ["93.184.215.14"]})(host)

    await check_destination(OPEN, "https://BÜCHER.example/", resolve=resolve)
    with pytest.raises(ValidationError, match="cloud metadata service"):
        await check_destination(OPEN, "http://ｍｅｔａｄａｔａ.google.internal/", resolve=resolve)
    assert looked_up == ["xn--bcher-kva.example"]


async def test_the_system_resolver_answers_offline_for_numeric_and_hosts_file_names() -> None:
    assert await resolve_host("127.0.0.1") == [ipaddress.ip_address("127.0.0.1")]
    assert all(address.is_loopback for address in await resolve_host("localhost"))
