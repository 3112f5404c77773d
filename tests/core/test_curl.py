"""The curl command of a delivery request: every argument survives the shell, credentials
of the tenant's headers are masked and nothing of Steeple's is."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.curl import MASK, BodyNotShellSafe, curl_command, looks_secret
from appliance.core.delivery import DeliveryRequest

URL = "https://hooks.example.com/steeple?team=a&b='c'"


def request(*headers: tuple[str, str], body: bytes = b'{"n":1}') -> DeliveryRequest:
    return DeliveryRequest(url=URL, headers=headers, body=body)


def test_the_command_sends_method_url_headers_and_body_in_order() -> None:
    built = request(("X-Idempotency-Key", "k" * 64), ("X-Team", "billing"), ("X-Empty", ""))
    command = curl_command(built, tenant_headers=["X-Team", "X-Empty"], timeout_seconds=30)
    assert command.argv == (
        "curl", "--request", "POST", "--url", URL, "--max-time", "30",
        "--header", f"X-Idempotency-Key: {'k' * 64}",
        "--header", "X-Team: billing",
        "--header", "X-Empty;",  # curl drops a header written "X-Empty:"
        "--header", "Expect:",
        "--data-raw", '{"n":1}',
    )  # fmt: skip
    assert command.masked == ()
    assert shlex.split(command.line) == list(command.argv)


@pytest.mark.parametrize(
    "name",
    ["Authorization", "cookie", "Proxy-Authorization", "X-Api-Key", "X-Auth-Token",
     "Client-Secret", "X-Session-Id", "X-Password", "X-Credentials"],
)  # fmt: skip
def test_credentials_the_tenant_set_are_masked(name: str) -> None:
    assert looks_secret(name)
    built = request(("X-Signature", "v1,abc"), (name, "hunter2"), ("X-Team", "billing"))
    command = curl_command(built, tenant_headers=[name.upper(), "X-Team"], timeout_seconds=5)
    assert f"{name}: {MASK}" in command.argv
    assert "hunter2" not in command.line
    assert "X-Team: billing" in command.argv
    assert command.masked == (name,)


def test_steeples_own_headers_are_never_masked() -> None:
    built = request(("X-Idempotency-Key", "k" * 64), ("X-Signature", "v1,abc"))
    command = curl_command(built, tenant_headers=[], timeout_seconds=5)
    assert f"X-Idempotency-Key: {'k' * 64}" in command.argv
    assert "X-Signature: v1,abc" in command.argv
    assert not looks_secret("X-Team") and not looks_secret("X-Signature")


@pytest.mark.parametrize("body", [b"a\x00b", b"\xff\xfe"])
def test_a_body_no_command_line_can_carry_is_refused(body: bytes) -> None:
    with pytest.raises(BodyNotShellSafe):
        curl_command(request(body=body), tenant_headers=[], timeout_seconds=5)


@given(
    values=st.lists(
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126)), max_size=4
    ),
    body=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
)
def test_the_line_splits_back_into_exactly_the_arguments(values: list[str], body: str) -> None:
    headers = tuple((f"X-H{i}", value) for i, value in enumerate(values))
    built = request(*headers, body=body.encode("utf-8"))
    command = curl_command(built, tenant_headers=[name for name, _ in headers], timeout_seconds=9)
    assert shlex.split(command.line) == list(command.argv)
    assert command.argv[-1] == body
