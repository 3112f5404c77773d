"""Which destinations Steeple may deliver to (ADR 0032, "Outbound safety (SSRF)").

Rules:
- Only public addresses are delivery targets. Loopback, private (RFC 1918), link-local,
  CGNAT, unique-local, site-local, multicast, broadcast, reserved, documentation,
  benchmarking and unspecified ranges are blocked unless the operator allow-lists a CIDR
  (``--allow-target``). Outside ``2000::/3`` nothing in IPv6 is global unicast, so every
  such address is blocked as reserved.
- IPv4 embedded in IPv6 (IPv4-mapped, IPv4-compatible ``::a.b.c.d``, NAT64
  ``64:ff9b::/96``, 6to4, Teredo's client) is unwrapped first and the embedded IPv4 address
  is judged: ``::ffff:127.0.0.1`` and ``::169.254.169.254`` are what they embed.
- Never allowed, whatever the allow-list says: cloud metadata addresses, which hand out
  the host's credentials, and the "this host" ranges ``0.0.0.0/8`` and ``::``, which reach
  the appliance's own machine (Linux connects ``0.0.0.0`` to the local host). An
  allow-list entry that covers one is refused when the settings are parsed.
- Host names are normalised before anything looks at them (:func:`ascii_host`: IDNA with
  the UTS #46 mapping, lower case), so ``ｍｅｔａｄａｔａ.google.internal`` is judged as
  ``metadata.google.internal``; the same normalised name is resolved, connected to and
  sent as ``Host``.
- ``check_target_url`` is the static half of the check (scheme, userinfo, host names that
  name the machine itself or a metadata service, IP-literal hosts). Names are resolved and
  their addresses judged by ``engine.delivery``, at write time and again at connect time.

Pure: no I/O (the stdlib and the ``idna`` codec). ``block_reason`` is the single judge of
an address.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import TypeAlias
from urllib.parse import SplitResult, urlsplit

import idna

from appliance.errors import ConfigError, ValidationError

IPAddress: TypeAlias = IPv4Address | IPv6Address
IPNetwork: TypeAlias = IPv4Network | IPv6Network

MAX_URL_LENGTH = 2048
ALLOWED_SCHEMES = frozenset({"http", "https"})
ALLOW_FLAG = "--allow-target"
_FIELD = "target_url"
_SETTING = "allow_target"

# Instance metadata services. Reaching one hands out the host's cloud credentials, so no
# allow-list can open them.
METADATA_ADDRESSES: tuple[IPAddress, ...] = tuple(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle…
        "169.254.170.2",  # AWS ECS task metadata and credentials
        "169.254.170.23",  # AWS EKS pod identity agent
        "169.254.0.23",  # Tencent Cloud
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (classic)
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity over IPv6
        "fd20:ce::254",  # GCP metadata over IPv6
    )
)

# "This host": a connection to 0.0.0.0 (or ::) reaches the appliance's own machine, so no
# allow-list can open them either.
THIS_HOST_RANGES: tuple[IPNetwork, ...] = (IPv4Network("0.0.0.0/8"), IPv6Network("::/128"))

# Host names that name this machine or a metadata service: refused before any lookup.
BLOCKED_HOSTNAMES = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
    }
)

# (range, what it is). Judged longest prefix first, so a /32 wins over its enclosing /4.
_BLOCKED_RANGES: tuple[tuple[IPNetwork, str], ...] = tuple(
    sorted(
        (
            (ipaddress.ip_network(cidr), label)
            for cidr, label in (
                ("0.0.0.0/32", "an unspecified address"),
                ("0.0.0.0/8", "a 'this network' address (0.0.0.0/8)"),
                ("10.0.0.0/8", "a private address (RFC 1918)"),
                ("100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)"),
                ("127.0.0.0/8", "a loopback address"),
                ("169.254.0.0/16", "a link-local address"),
                ("172.16.0.0/12", "a private address (RFC 1918)"),
                ("192.0.0.0/24", "a reserved address (IETF protocol assignments)"),
                ("192.0.2.0/24", "a documentation address (192.0.2.0/24)"),
                ("192.88.99.0/24", "a reserved address (6to4 relay anycast)"),
                ("192.168.0.0/16", "a private address (RFC 1918)"),
                ("198.18.0.0/15", "a benchmarking address (198.18.0.0/15)"),
                ("198.51.100.0/24", "a documentation address (198.51.100.0/24)"),
                ("203.0.113.0/24", "a documentation address (203.0.113.0/24)"),
                ("224.0.0.0/4", "a multicast address"),
                ("240.0.0.0/4", "a reserved address (240.0.0.0/4)"),
                ("255.255.255.255/32", "the broadcast address"),
                ("::/128", "an unspecified address"),
                ("::1/128", "a loopback address"),
                ("64:ff9b:1::/48", "a private address (local-use NAT64)"),
                ("100::/64", "a reserved address (discard-only)"),
                ("2001::/23", "a reserved address (IETF protocol assignments)"),
                ("2001:db8::/32", "a documentation address (2001:db8::/32)"),
                ("3fff::/20", "a documentation address (3fff::/20)"),
                ("fc00::/7", "a unique local address (fc00::/7)"),
                ("fe80::/10", "a link-local address"),
                ("fec0::/10", "a site-local address"),
                ("ff00::/8", "a multicast address"),
            )
        ),
        key=lambda entry: -entry[0].prefixlen,
    )
)
_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")
_NAT64 = IPv6Network("64:ff9b::/96")
_TEREDO = IPv6Network("2001::/32")

NEVER = "which can never be allowed"
_CHECKED_URLS = 4096  # target URLs that passed, kept with their policy

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class AddressPolicy:
    """The operator's allow-list: ranges that may be delivered to although not public."""

    allow: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, cidrs: Sequence[str]) -> AddressPolicy:
        """Parse ``--allow-target`` values; raises ConfigError("allow_target", …)."""
        networks: list[IPNetwork] = []
        for text in cidrs:
            network = _parse_cidr(text)
            if network not in networks:
                networks.append(network)
        return cls(allow=tuple(networks))

    def allows(self, address: IPAddress) -> bool:
        return any(address in network for network in self.allow)


def _parse_cidr(text: str) -> IPNetwork:
    try:
        loose = ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise ConfigError(
            _SETTING, f"{text!r} is not an IP address or CIDR range (e.g. 10.0.0.0/8, fd12::/16)"
        ) from None
    try:
        network = ipaddress.ip_network(text.strip())
    except ValueError:
        raise ConfigError(
            _SETTING, f"{text!r} has host bits set; did you mean {loose.with_prefixlen}?"
        ) from None
    covered = _metadata_covered_by(network)
    if covered is not None:
        raise ConfigError(
            _SETTING,
            f"{network.with_prefixlen} contains the cloud metadata address {covered}, "
            "which can never be allowed; list narrower ranges that leave it out",
        )
    same_version_first = sorted(THIS_HOST_RANGES, key=lambda r: r.version != network.version)
    this_host = next((r for r in same_version_first if _overlaps(network, r)), None)
    if this_host is not None:
        raise ConfigError(
            _SETTING,
            f"{network.with_prefixlen} overlaps {this_host.with_prefixlen}, addresses of the "
            "appliance's own machine, which can never be allowed; list narrower ranges",
        )
    return network


def _overlaps(network: IPNetwork, this_host: IPNetwork) -> bool:
    """Whether ``network`` shares an address with ``this_host``, also through the IPv6
    forms that embed an IPv4 range's first address (see ``_ip_forms``)."""
    if isinstance(network, IPv4Network) and isinstance(this_host, IPv4Network):
        return network.overlaps(this_host)
    if isinstance(network, IPv6Network) and isinstance(this_host, IPv6Network):
        return network.overlaps(this_host)
    return any(
        form.version == network.version and form in network
        for form in _ip_forms(this_host.network_address)
    )


def _metadata_covered_by(network: IPNetwork) -> IPAddress | None:
    """A metadata address inside ``network``, also through IPv4-in-IPv6 forms."""
    for address in METADATA_ADDRESSES:
        if any(form.version == network.version and form in network for form in _ip_forms(address)):
            return address
    return None


def _ip_forms(address: IPAddress) -> tuple[IPAddress, ...]:
    """``address`` and, for IPv4, the IPv6 addresses that embed it (see ``embedded_ipv4``)."""
    if isinstance(address, IPv6Address):
        return (address,)
    v4 = int(address)
    return (
        address,
        IPv6Address((0xFFFF << 32) | v4),  # IPv4-mapped
        IPv6Address(v4),  # IPv4-compatible (deprecated; ::0.0.0.0 is :: itself)
        IPv6Address(int(_NAT64.network_address) | v4),
        IPv6Address((0x2002 << 112) | (v4 << 80)),  # 6to4
        IPv6Address(int(_TEREDO.network_address) | (v4 ^ 0xFFFFFFFF)),  # Teredo client
    )


def embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo
    client). ``::`` and ``::1`` are themselves, not IPv4-compatible forms."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if int(address) >> 32 == 0 and int(address) > 1:
        return IPv4Address(int(address))  # IPv4-compatible ::a.b.c.d
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # ipaddress already undoes the client's obfuscation
    return None


def block_reason(policy: AddressPolicy, address: IPAddress) -> str | None:
    """Why ``address`` may not be delivered to, or None when it may.

    The text completes "<address> is …", e.g. "a loopback address".
    """
    if isinstance(address, IPv6Address):
        address = IPv6Address(address.packed)  # drop any %scope: it does not change the range
    inner = embedded_ipv4(address) if isinstance(address, IPv6Address) else None
    judged: IPAddress = inner if inner is not None else address
    if address in METADATA_ADDRESSES or judged in METADATA_ADDRESSES:
        return f"a cloud metadata address, {NEVER}"
    if any(judged.version == r.version and judged in r for r in THIS_HOST_RANGES):
        return f"{_range_label(judged)} (it reaches the appliance's own machine), {NEVER}"
    if policy.allows(address) or policy.allows(judged):
        return None
    label = _range_label(judged)
    if label is not None and inner is not None:
        return f"{label}: it embeds the IPv4 address {inner}"
    return label


def _range_label(address: IPAddress) -> str | None:
    for network, label in _BLOCKED_RANGES:
        if address.version == network.version and address in network:
            return label
    if isinstance(address, IPv6Address) and address not in _GLOBAL_UNICAST_V6:
        return "a reserved address (outside IPv6 global unicast 2000::/3)"
    return None


def describe_block(address: IPAddress, reason: str, *, host: str | None = None) -> str:
    """The full message for a blocked address: what is wrong and how to fix it.

    ``host`` is the name that resolved to ``address``, when there was one.
    """
    subject = f"{host} resolves to {address}, which is" if host else f"{address} is"
    if reason.endswith(NEVER):
        return f"{subject} {reason}, not even with {ALLOW_FLAG}"
    return (
        f"{subject} {reason}; Steeple only delivers to public addresses unless the "
        f"operator allows it with {ALLOW_FLAG}"
    )


def check_target_url(url: str, policy: AddressPolicy) -> str:
    """Static checks of a delivery URL; raises ValidationError(field "target_url").

    Host names are not resolved here (``engine.delivery.check_destination`` does), but an
    IP-literal host is judged at once. Returns ``url`` unchanged. A URL that passes is
    remembered with its policy (a create checks it twice, a batch's items share a few);
    a refused one is checked, and refused, every time.
    """
    _passes(url, policy)
    return url


@functools.lru_cache(maxsize=_CHECKED_URLS)  # thread-safe; an exception is never cached
def _passes(url: str, policy: AddressPolicy) -> None:
    parts = _split(url)
    host = _host_of(parts)
    literal = parse_ip_literal(host)
    if literal is not None:
        reason = block_reason(policy, literal)
        if reason is not None:
            raise ValidationError.single(_FIELD, describe_block(literal, reason))
        return
    _check_hostname(host)


def _split(url: str) -> SplitResult:
    if not url:
        raise ValidationError.single(_FIELD, "is empty; give an http:// or https:// URL")
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError.single(_FIELD, f"is longer than {MAX_URL_LENGTH} characters")
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        raise ValidationError.single(
            _FIELD, "contains spaces or control characters; percent-encode them"
        )
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced or malformed [IPv6] host
        raise ValidationError.single(_FIELD, "is not a valid URL (check the [IPv6] host)") from None
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        shown = f"{parts.scheme!r}" if parts.scheme else "no scheme"
        raise ValidationError.single(_FIELD, f"has {shown}; only http:// and https:// are allowed")
    if "#" in url:
        raise ValidationError.single(_FIELD, "has a #fragment, which is never sent; remove it")
    if "@" in parts.netloc:
        raise ValidationError.single(
            _FIELD, "contains user:password@; put credentials in a header instead"
        )
    return parts


def _host_of(parts: SplitResult) -> str:
    try:
        port = parts.port
    except ValueError:
        raise ValidationError.single(_FIELD, "has a port outside 1–65535") from None
    if port == 0:
        raise ValidationError.single(_FIELD, "has port 0; give a port in 1–65535")
    host = parts.hostname or ""
    if not host:
        raise ValidationError.single(_FIELD, "has no host; e.g. https://hooks.example.com/steeple")
    return host


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address when ``host`` is an IP literal (a URL's ``%25`` zone escape allowed)."""
    try:
        return ipaddress.ip_address(host.replace("%25", "%"))
    except ValueError:
        return None


def ascii_host(host: str) -> str:
    """A host name as it is checked, resolved, connected to and sent: IDNA (UTS #46
    mapping, so fullwidth and upper-case letters become their plain forms), lower case.
    A trailing dot is kept. Raises ValidationError when it is no valid name."""
    if host.isascii():
        return host.lower()
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        raise ValidationError.single(_FIELD, f"host {host!r} is not a valid host name") from None


def _check_hostname(host: str) -> None:
    ascii_name = ascii_host(host).rstrip(".")  # normalised before any name is judged
    if ascii_name in BLOCKED_HOSTNAMES or ascii_name.endswith(".localhost"):
        raise ValidationError.single(_FIELD, _refused_name(ascii_name))
    labels = ascii_name.split(".")
    if len(ascii_name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValidationError.single(_FIELD, f"host {host!r} is not a valid host name")
    if _NUMERIC_LABEL.match(labels[-1]):
        # 127.1, 2130706433 or 0x7f.0.0.1 resolve to addresses; insist on the plain form.
        raise ValidationError.single(
            _FIELD,
            f"host {host!r} is neither a host name nor a dotted-quad IPv4 address; "
            "write addresses in full (e.g. 203.0.113.7)",
        )


def _refused_name(name: str) -> str:
    if "localhost" in name or name.startswith("ip6-"):
        return (
            f"host {name!r} names the appliance's own machine; Steeple only delivers to "
            f"public addresses. To deliver to this machine, use its address "
            f"(e.g. http://127.0.0.1:8080/) and ask the operator to allow it with {ALLOW_FLAG}"
        )
    return f"host {name!r} is a cloud metadata service, which can never be a delivery target"
