"""Who is asking, when reverse proxies stand in front (docs/operations.md, "Behind a
reverse proxy").

Rules this module guards:
- With ``trusted`` proxies (the ``trust_proxy`` setting, 0 to :data:`MAX_TRUSTED`), only
  the last ``trusted`` entries of ``X-Forwarded-For`` were written by them: each appends
  the address it received the request from. The client is the ``trusted``-th entry from
  the right; everything to its left came from the client and is ignored.
- With no trusted proxy, or a header shorter than ``trusted`` entries, or an entry there
  that is not an IP address, the client is the peer of the TCP connection.
- Several ``X-Forwarded-For`` header lines are one list, in order (RFC 9110, 5.3).
- ``X-Forwarded-Proto`` follows the same rule: the entry the outermost trusted proxy wrote.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Final

MAX_TRUSTED: Final = 8


def entries(header_values: Sequence[str]) -> list[str]:
    """The comma-separated entries of every header line, in order, stripped."""
    return [part.strip() for value in header_values for part in value.split(",")]


def trusted_entry(header_values: Sequence[str], trusted: int) -> str | None:
    """The entry the outermost of ``trusted`` proxies wrote, or None when there is none."""
    if trusted <= 0:
        return None
    found = entries(header_values)
    if len(found) < trusted:
        return None
    return found[-trusted] or None


def client_address(peer: str | None, forwarded_for: Sequence[str], trusted: int) -> str:
    """The client's address: the peer's, or the entry the outermost trusted proxy
    appended to ``X-Forwarded-For`` (canonical text). ``"unknown"`` without either."""
    entry = trusted_entry(forwarded_for, trusted)
    if entry is not None:
        try:
            return str(ipaddress.ip_address(_bare(entry)))
        except ValueError:
            pass
    return peer or "unknown"


def forwarded_https(scheme: str, forwarded_proto: Sequence[str], trusted: int) -> bool:
    """Whether the client's request came over HTTPS: the connection's scheme, or what the
    outermost trusted proxy wrote in ``X-Forwarded-Proto``."""
    if scheme == "https":
        return True
    return (trusted_entry(forwarded_proto, trusted) or "").lower() == "https"


def _bare(entry: str) -> str:
    """``[2001:db8::1]:443`` or ``192.0.2.1:443`` (as some proxies write) to the address."""
    if entry.startswith("["):
        return entry[1:].partition("]")[0]
    host, sep, port = entry.rpartition(":")
    if sep and host.count(":") == 0 and port.isdigit():
        return host
    return entry
