"""The Host allow-list: names compare without port, case or trailing dot; ``*`` is off."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from appliance.core.hosts import AllowedHosts, default_hosts, host_name


def test_host_names_compare_without_port_case_or_dot() -> None:
    assert host_name("Steeple.Example.COM.:8443") == "steeple.example.com"
    assert host_name("[::1]:8080") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"
    allowed = AllowedHosts.of(["steeple.example.com", "[::1]"])
    assert allowed.allows("STEEPLE.example.com:443")
    assert allowed.allows("[::1]:1")
    assert not allowed.allows("attacker.example")
    assert not allowed.allows("steeple.example.com.attacker.example")
    assert not allowed.allows(None)
    assert not allowed.allows("")


@given(st.text(max_size=40))
def test_a_star_allows_every_host_and_loopback_only_loopback(host: str) -> None:
    assert AllowedHosts.of(["*"]).allows(host)
    if AllowedHosts.loopback().allows(host):
        assert host_name(host) in ("localhost", "127.0.0.1", "::1")


def test_the_default_is_the_listen_address_loopback_and_the_public_url() -> None:
    assert default_hosts("127.0.0.1", "") == ("localhost", "127.0.0.1", "::1")
    assert default_hosts("0.0.0.0", "https://cron.example.org/") == (
        "localhost",
        "127.0.0.1",
        "::1",
        "cron.example.org",
    )
    assert default_hosts("192.0.2.5", "")[-1] == "192.0.2.5"
