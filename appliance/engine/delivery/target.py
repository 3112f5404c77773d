"""A delivery URL parsed once into what the connection needs: where to connect, the
``Host`` header and the request target — as bytes equal to what httpx would send.

Pure. The host is normalised by ``core.addresses.ascii_host`` (the same name the address
check judged); the path and query are percent-encoded with the WHATWG path and query sets
and ``.``/``..`` segments are removed, as httpx does. The URL must have passed
``core.addresses.check_target_url`` (scheme, no userinfo, no fragment, no blanks).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from appliance.core.addresses import ascii_host, parse_ip_literal

Origin = tuple[str, str, int]  # scheme, host, port

_DEFAULT_PORTS = {"http": 80, "https": 443}
# The WHATWG query percent-encode set, and the path set (the query set plus ? ` { }).
_QUERY_SAFE = frozenset(chr(i) for i in range(0x21, 0x7F)) - frozenset('"#<>')
_PATH_SAFE = _QUERY_SAFE - frozenset("?`{}")


@dataclass(frozen=True, slots=True)
class Target:
    origin: Origin
    netloc: bytes  # the Host header: the host, and the port when it is not the default
    path: bytes  # path and query, as sent


def parse_target(url: str) -> Target:
    """``url`` (already checked) as a :class:`Target`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host, bracketed = _host(parts.netloc)
    port = parts.port if parts.port != _DEFAULT_PORTS[scheme] else None
    shown = f"[{host}]" if bracketed else host
    netloc = shown if port is None else f"{shown}:{port}"
    rest = url[url.index("//") + 2 + len(parts.netloc) :]
    path, has_query, query = rest.partition("?")
    target = _quote(_drop_dot_segments(path), _PATH_SAFE) or "/"
    if has_query:
        target += "?" + _quote(query, _QUERY_SAFE)
    origin = (scheme, host, port or _DEFAULT_PORTS[scheme])
    return Target(origin, netloc.encode("ascii"), target.encode("ascii"))


def _host(netloc: str) -> tuple[str, bool]:
    """The host as connected to and sent, and whether it is written in brackets (IPv6).
    IP literals are kept as written; names are normalised."""
    if netloc.startswith("["):
        return netloc[1 : netloc.index("]")], True
    host = netloc.rpartition(":")[0] if ":" in netloc else netloc
    return (host if parse_ip_literal(host) is not None else ascii_host(host)), False


def _quote(text: str, safe: frozenset[str]) -> str:
    if all(ch in safe for ch in text):
        return text  # the common case
    return "".join(
        ch if ch in safe else "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in text
    )


def _drop_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4: ``/a/./b/../c`` → ``/a/c``."""
    if "." not in path:
        return path
    segments = path.split("/")
    if "." not in segments and ".." not in segments:
        return path
    kept: list[str] = []
    for segment in segments:
        if segment == "..":
            if kept and kept != [""]:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    return "/".join(kept)
