"""The SSRF address judge: every blocked range, IPv4 hidden in IPv6, metadata, URL rules."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.addresses import (
    METADATA_ADDRESSES,
    AddressPolicy,
    ascii_host,
    block_reason,
    check_target_url,
    embedded_ipv4,
)
from appliance.errors import ConfigError, ValidationError

OPEN = AddressPolicy()
EVERYTHING = AddressPolicy(allow=(ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")))
OWN_MACHINE = "(it reaches the appliance's own machine), which can never be allowed"


def reason(address: str, policy: AddressPolicy = OPEN) -> str | None:
    return block_reason(policy, ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.255.254", "a loopback address"),
        ("10.1.2.3", "a private address (RFC 1918)"),
        ("172.16.0.1", "a private address (RFC 1918)"),
        ("172.31.255.255", "a private address (RFC 1918)"),
        ("192.168.1.1", "a private address (RFC 1918)"),
        ("169.254.1.1", "a link-local address"),
        ("100.64.0.1", "a carrier-grade NAT address (100.64.0.0/10)"),
        ("100.127.255.254", "a carrier-grade NAT address (100.64.0.0/10)"),
        ("224.0.0.1", "a multicast address"),
        ("239.255.255.250", "a multicast address"),
        ("240.0.0.1", "a reserved address (240.0.0.0/4)"),
        ("255.255.255.255", "the broadcast address"),
        ("0.0.0.0", f"an unspecified address {OWN_MACHINE}"),
        ("0.1.2.3", f"a 'this network' address (0.0.0.0/8) {OWN_MACHINE}"),
        ("192.0.0.8", "a reserved address (IETF protocol assignments)"),
        ("192.0.2.1", "a documentation address (192.0.2.0/24)"),
        ("198.51.100.7", "a documentation address (198.51.100.0/24)"),
        ("203.0.113.9", "a documentation address (203.0.113.0/24)"),
        ("198.18.0.1", "a benchmarking address (198.18.0.0/15)"),
        ("198.19.255.255", "a benchmarking address (198.18.0.0/15)"),
        ("192.88.99.1", "a reserved address (6to4 relay anycast)"),
        ("::", f"an unspecified address {OWN_MACHINE}"),
        ("::1", "a loopback address"),
        ("fc00::1", "a unique local address (fc00::/7)"),
        ("fd12:3456::1", "a unique local address (fc00::/7)"),
        ("fe80::1", "a link-local address"),
        ("fe80::1%eth0", "a link-local address"),
        ("fec0::1", "a site-local address"),
        ("ff02::1", "a multicast address"),
        ("2001:db8::1", "a documentation address (2001:db8::/32)"),
        ("3fff::1", "a documentation address (3fff::/20)"),
        ("2001:2::1", "a reserved address (IETF protocol assignments)"),
        ("100::1", "a reserved address (discard-only)"),
        ("64:ff9b:1::1", "a private address (local-use NAT64)"),
        ("1::1", "a reserved address (outside IPv6 global unicast 2000::/3)"),
        ("1::2", "a reserved address (outside IPv6 global unicast 2000::/3)"),
    ],
)
def test_every_non_public_range_is_blocked(address: str, expected: str) -> None:
    assert reason(address) == expected


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1", "198.20.0.1",
     "2606:4700:4700::1111", "2a00:1450:4001::200e", "64:ff9b::8.8.8.8", "2002:808:808::1"],
)  # fmt: skip
def test_public_addresses_pass(address: str) -> None:
    assert reason(address) is None


@pytest.mark.parametrize(
    ("address", "inner", "expected"),
    [
        ("::ffff:127.0.0.1", "127.0.0.1", "a loopback address"),
        ("::ffff:10.0.0.1", "10.0.0.1", "a private address (RFC 1918)"),
        ("64:ff9b::7f00:1", "127.0.0.1", "a loopback address"),
        ("64:ff9b::192.168.0.1", "192.168.0.1", "a private address (RFC 1918)"),
        ("2002:7f00:1::", "127.0.0.1", "a loopback address"),
        ("2002:a9fe:101::1", "169.254.1.1", "a link-local address"),
        # Teredo: the client address is stored inverted (0x80ffffff -> 127.0.0.0).
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1", "a loopback address"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "10.0.0.1", "a private address (RFC 1918)"),
        # IPv4-compatible (deprecated ::a.b.c.d): unwrapped like IPv4-mapped.
        ("::127.0.0.1", "127.0.0.1", "a loopback address"),
        ("::10.0.0.1", "10.0.0.1", "a private address (RFC 1918)"),
    ],
)
def test_ipv4_embedded_in_ipv6_is_unwrapped_and_judged(
    address: str, inner: str, expected: str
) -> None:
    v6 = ipaddress.IPv6Address(address)
    assert embedded_ipv4(v6) == ipaddress.IPv4Address(inner)
    assert reason(address) == f"{expected}: it embeds the IPv4 address {inner}"


def test_embedded_public_ipv4_passes_and_plain_ipv6_embeds_nothing() -> None:
    assert reason("::ffff:8.8.8.8") is None
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700::1")) is None


METADATA_FORMS = [
    "169.254.169.254",
    "169.254.170.2",
    "100.100.100.200",
    "fd00:ec2::254",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "2002:a9fe:a9fe::",
    "2001::5601:5601",  # Teredo client 169.254.169.254, inverted
    "::169.254.169.254",  # IPv4-compatible
]


@pytest.mark.parametrize("address", METADATA_FORMS)
def test_metadata_is_blocked_even_when_its_range_is_allowed(address: str) -> None:
    # The allow-list cannot name them (parse refuses), so build the policy directly.
    everything = AddressPolicy(
        allow=(ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    )
    assert reason(address, everything) == "a cloud metadata address, which can never be allowed"
    assert reason("10.0.0.1", everything) is None  # the policy does allow everything else


@pytest.mark.parametrize("address", ["0.0.0.0", "0.0.0.1", "0.255.255.255", "::", "::ffff:0.0.0.0"])
def test_this_host_is_blocked_even_when_its_range_is_allowed(address: str) -> None:
    """``http://0.0.0.0/`` reaches the appliance's own machine: like metadata, no allow-list
    opens it."""
    judged = reason(address, EVERYTHING)
    assert judged is not None and judged.endswith(OWN_MACHINE)


def test_allow_list_opens_exactly_its_ranges() -> None:
    policy = AddressPolicy.parse(["127.0.0.0/8", "10.1.0.0/16", "fd12::/16"])
    assert reason("127.0.0.1", policy) is None
    assert reason("::ffff:127.0.0.1", policy) is None  # judged as the embedded address
    assert reason("10.1.200.3", policy) is None
    assert reason("fd12::5", policy) is None
    assert reason("10.2.0.1", policy) == "a private address (RFC 1918)"
    assert reason("::1", policy) == "a loopback address"


@pytest.mark.parametrize(
    ("cidr", "message"),
    [
        ("169.254.0.0/16", "contains the cloud metadata address 169.254.169.254"),
        ("0.0.0.0/0", "contains the cloud metadata address 169.254.169.254"),
        ("100.64.0.0/10", "contains the cloud metadata address 100.100.100.200"),
        ("169.254.169.254", "contains the cloud metadata address 169.254.169.254"),
        ("fd00::/8", "contains the cloud metadata address fd00:ec2::254"),
        ("::ffff:0:0/96", "contains the cloud metadata address 169.254.169.254"),
        ("2002::/16", "contains the cloud metadata address 169.254.169.254"),
        ("::/96", "contains the cloud metadata address 169.254.169.254"),  # IPv4-compatible
        ("0.0.0.0/8", "overlaps 0.0.0.0/8, addresses of the appliance's own machine"),
        ("0.0.0.0", "overlaps 0.0.0.0/8, addresses of the appliance's own machine"),
        ("0.0.0.0/7", "overlaps 0.0.0.0/8, addresses of the appliance's own machine"),
        ("::/128", "overlaps ::/128, addresses of the appliance's own machine"),
        ("::ffff:0.0.0.0/104", "overlaps 0.0.0.0/8, addresses of the appliance's own machine"),
        ("10.0.0.1/8", "has host bits set; did you mean 10.0.0.0/8?"),
        ("2001:db8::1/32", "has host bits set; did you mean 2001:db8::/32?"),
        ("intranet", "is not an IP address or CIDR range"),
        ("10.0.0.0/33", "is not an IP address or CIDR range"),
        ("", "is not an IP address or CIDR range"),
    ],
)
def test_allow_list_refuses_metadata_and_garbage(cidr: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        AddressPolicy.parse([cidr])
    assert caught.value.setting == "allow_target"
    assert message in caught.value.message


def test_allow_list_accepts_narrow_link_local_and_dedupes() -> None:
    policy = AddressPolicy.parse(["169.254.1.0/24", "169.254.1.0/24", "10.0.0.5"])
    assert [str(n) for n in policy.allow] == ["169.254.1.0/24", "10.0.0.5/32"]


@given(st.sampled_from(METADATA_ADDRESSES), st.integers(min_value=0, max_value=32))
def test_no_accepted_allow_list_entry_covers_metadata(metadata: object, prefix: int) -> None:
    assert isinstance(metadata, ipaddress.IPv4Address | ipaddress.IPv6Address)
    bits = prefix if metadata.version == 4 else prefix * 4
    network = ipaddress.ip_network(f"{metadata}/{bits}", strict=False)
    with pytest.raises(ConfigError):
        AddressPolicy.parse([str(network)])


def url_error(url: str, policy: AddressPolicy = OPEN) -> str:
    with pytest.raises(ValidationError) as caught:
        check_target_url(url, policy)
    [error] = caught.value.errors
    assert error.field == "target_url"
    return error.message


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:8000/hook", "127.0.0.1 is a loopback address; Steeple only delivers "
         "to public addresses unless the operator allows it with --allow-target"),
        ("http://[::1]/", "::1 is a loopback address"),
        ("http://[::ffff:10.0.0.1]/", "a private address (RFC 1918): it embeds the IPv4 address"),
        ("http://169.254.169.254/latest/meta-data/",
         "169.254.169.254 is a cloud metadata address, which can never be allowed"),
        ("ftp://example.com/", "has 'ftp'; only http:// and https:// are allowed"),
        ("example.com/hook", "has no scheme; only http:// and https:// are allowed"),
        ("https://user:pw@example.com/", "contains user:password@"),
        ("https://example.com/#top", "has a #fragment"),
        ("https:///path", "has no host"),
        ("https://example.com:99999/", "has a port outside 1–65535"),
        ("https://example.com:0/", "has port 0"),
        ("https://exa mple.com/", "contains spaces or control characters"),
        ("https://example.com/\n", "contains spaces or control characters"),
        ("http://[::1/", "is not a valid URL"),
        ("", "is empty"),
        ("https://example.com/" + "a" * 2048, "is longer than 2048 characters"),
        ("http://localhost:8080/", "host 'localhost' names the appliance's own machine"),
        ("http://LOCALHOST./", "host 'localhost' names the appliance's own machine"),
        ("http://api.localhost/", "use its address (e.g. http://127.0.0.1:8080/)"),
        ("http://metadata.google.internal/", "is a cloud metadata service"),
        # Normalised (IDNA, UTS #46) before the name is judged: fullwidth letters too.
        ("http://ｍｅｔａｄａｔａ.google.internal/", "host 'metadata.google.internal' is a cloud"),
        ("http://ＬＯＣＡＬＨＯＳＴ/", "host 'localhost' names the appliance's own machine"),
        ("http://[::169.254.169.254]/", "is a cloud metadata address"),
        ("http://[::127.0.0.1]/", "a loopback address: it embeds the IPv4 address 127.0.0.1"),
        ("http://0.0.0.0/", f"0.0.0.0 is an unspecified address {OWN_MACHINE}"),
        ("http://metadata/", "is a cloud metadata service"),
        ("http://instance-data/", "is a cloud metadata service"),
        ("http://127.1/", "write addresses in full"),
        ("http://2130706433/", "write addresses in full"),
        ("http://0x7f.0.0.1/", "write addresses in full"),
        ("http://127.000.000.001/", "write addresses in full"),
        ("http://-bad-.example/", "is not a valid host name"),
        ("http://a..example/", "is not a valid host name"),
    ],
)  # fmt: skip
def test_check_target_url_says_what_is_wrong(url: str, message: str) -> None:
    assert message in url_error(url)


@pytest.mark.parametrize(
    "url",
    ["https://hooks.example.com/steeple", "http://example.com:8080/a?b=c", "HTTPS://Example.COM",
     "https://bücher.example/", "http://8.8.8.8/", "http://[2606:4700::1]:443/", "http://host/"],
)  # fmt: skip
def test_check_target_url_returns_acceptable_urls_unchanged(url: str) -> None:
    assert check_target_url(url, OPEN) == url


def test_allow_list_opens_ip_literal_urls_but_never_localhost_names() -> None:
    policy = AddressPolicy.parse(["127.0.0.0/8"])
    assert check_target_url("http://127.0.0.1:9000/", policy) == "http://127.0.0.1:9000/"
    assert "own machine" in url_error("http://localhost:9000/", policy)


def test_allowing_0_0_0_0_does_not_reach_the_host_itself() -> None:
    """``--allow-target 0.0.0.0/8`` is refused at start, and no policy opens the URL."""
    with pytest.raises(ConfigError, match="appliance's own machine"):
        AddressPolicy.parse(["0.0.0.0/8"])
    assert OWN_MACHINE in url_error("http://0.0.0.0:8080/", EVERYTHING)
    assert OWN_MACHINE in url_error("http://[::]:8080/", EVERYTHING)


@pytest.mark.parametrize(
    ("host", "normalised"),
    [("Example.COM", "example.com"), ("bücher.example", "xn--bcher-kva.example"),
     ("ＥＸＡＭＰＬＥ.com", "example.com"), ("Straße.de", "xn--strae-oqa.de"),
     ("hooks.example.", "hooks.example.")],
)  # fmt: skip
def test_host_names_are_normalised_once_for_every_use(host: str, normalised: str) -> None:
    assert ascii_host(host) == normalised


def test_a_url_that_passed_is_remembered_with_its_policy_only() -> None:
    """Creates check a target URL twice and a batch's items share a few: a URL that passed
    is kept, keyed by the policy too; a refusal is never kept."""
    url = "http://10.20.30.40:8080/hook"
    allowing = AddressPolicy.parse(["10.0.0.0/8"])
    assert check_target_url(url, allowing) == url
    assert check_target_url(url, allowing) == url
    for _ in range(2):
        with pytest.raises(ValidationError) as refused:
            check_target_url(url, AddressPolicy())
        assert [e.field for e in refused.value.errors] == ["target_url"]
