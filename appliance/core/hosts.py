"""Which ``Host`` a request may name (docs/operations.md, "Host allow-list").

Rules this module guards:
- A request is answered only when its ``Host`` names one of the allowed hosts, so a page
  on another site that rebinds its DNS name to this appliance's address (DNS rebinding)
  reaches nothing: its requests carry its own name.
- Names compare without the port, case-insensitively, without a trailing dot; IPv6
  literals in brackets. ``*`` allows every host (the check is off).
- By default the allowed hosts are the listen address (unless a wildcard), the loopback
  names and the host of ``public_url``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

ANY: Final = "*"
LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")
WILDCARDS: Final = ("0.0.0.0", "::", "")


def host_name(host: str) -> str:
    """``Example.COM.:8080`` -> ``example.com``; ``[::1]:80`` -> ``::1``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


@dataclass(frozen=True, slots=True, kw_only=True)
class AllowedHosts:
    names: frozenset[str]
    any_host: bool = False

    @classmethod
    def of(cls, names: Iterable[str]) -> AllowedHosts:
        given = [name.strip() for name in names if name.strip()]
        return cls(names=frozenset(host_name(n) for n in given), any_host=ANY in given)

    @classmethod
    def loopback(cls) -> AllowedHosts:
        return cls.of(LOOPBACK_NAMES)

    def allows(self, host_header: str | None) -> bool:
        if self.any_host:
            return True
        return host_header is not None and host_name(host_header) in self.names


def default_hosts(listen_host: str, public_url: str) -> tuple[str, ...]:
    """The listen address (unless a wildcard), the loopback names, ``public_url``'s host."""
    names = [*LOOPBACK_NAMES]
    if listen_host not in WILDCARDS:
        names.append(listen_host)
    if public_url:
        names.append(urlsplit(public_url).hostname or "")
    return tuple(dict.fromkeys(n for n in names if n))
