"""The proxy rule: with N trusted proxies the client is the N-th ``X-Forwarded-For`` entry
from the right, whatever the client wrote to its left; with 0, the peer."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from appliance.core.forwarded import (
    MAX_TRUSTED,
    client_address,
    entries,
    forwarded_https,
    trusted_entry,
)

PEER = "10.0.0.1"
addresses = st.ip_addresses().map(str)
# What a client may write: addresses, garbage, commas and spaces included.
spoofed = st.lists(st.one_of(addresses, st.text(max_size=20)), max_size=6)


@given(spoofed=spoofed, appended=st.lists(addresses, min_size=1, max_size=MAX_TRUSTED))
def test_what_the_client_writes_never_decides_the_address(
    spoofed: list[str], appended: list[str]
) -> None:
    header = ", ".join([*spoofed, *appended])
    found = client_address(PEER, [header], len(appended))
    assert found == str(ipaddress.ip_address(appended[0]))


@given(header=st.lists(st.text(max_size=30), max_size=3))
def test_no_trusted_proxy_means_the_peer(header: list[str]) -> None:
    assert client_address(PEER, header, 0) == PEER


@given(appended=st.lists(addresses, max_size=MAX_TRUSTED), extra=st.integers(1, 3))
def test_a_header_shorter_than_the_proxies_means_the_peer(appended: list[str], extra: int) -> None:
    header = [", ".join(appended)] if appended else []
    assert client_address(PEER, header, len(appended) + extra) == PEER


def test_the_examples() -> None:
    assert client_address(PEER, ["1.1.1.1, 2.2.2.2"], 1) == "2.2.2.2"
    assert client_address(PEER, ["1.1.1.1, 2.2.2.2"], 2) == "1.1.1.1"
    assert client_address(PEER, ["1.1.1.1", "2.2.2.2, 3.3.3.3"], 2) == "2.2.2.2"
    assert client_address(PEER, ["1.1.1.1,not-an-ip"], 1) == PEER
    assert client_address(PEER, ["[2001:DB8::1]:443"], 1) == "2001:db8::1"
    assert client_address(PEER, ["192.0.2.7:5000"], 1) == "192.0.2.7"
    assert client_address(None, [], 1) == "unknown"
    assert entries(["a, b", "c"]) == ["a", "b", "c"]
    assert trusted_entry(["a, , c"], 2) is None


def test_https_is_the_connection_or_the_outermost_trusted_proxy() -> None:
    assert forwarded_https("https", [], 0)
    assert not forwarded_https("http", ["https"], 0)
    assert forwarded_https("http", ["https"], 1)
    assert not forwarded_https("http", ["https, http"], 1)  # the client wrote "https"
    assert forwarded_https("http", ["HTTPS, http"], 2)
