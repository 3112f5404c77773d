"""The record that requests arrived carrying ``X-Forwarded-For`` while ``trust_proxy`` is
0: a reverse proxy is probably in front, so every client looks like the proxy (one
sign-in throttle for all, ``/metrics`` open to whatever the proxy forwards).

The appliance writes it once per process, at the first such request, to
``proxy-seen.json`` in the data directory (``0600``, replaced atomically); ``steeple
doctor`` reads it and warns while ``trust_proxy`` is still 0 (docs/operations.md,
"Behind a reverse proxy").
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from appliance.core.instants import format_instant, parse_instant
from appliance.store.infra.datadir import FILE_MODE

PROXY_SEEN = "proxy-seen.json"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxySeen:
    at_ms: int
    peer: str


def record_proxy_seen(data_dir: Path, seen: ProxySeen) -> None:
    """Replace the record (atomically; a random temporary name, never followed)."""
    temporary = data_dir / f".{PROXY_SEEN}.{secrets.token_hex(8)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"at": format_instant(seen.at_ms), "peer": seen.peer}, out)
    temporary.rename(data_dir / PROXY_SEEN)


def proxy_seen(data_dir: Path) -> ProxySeen | None:
    """The record, or None (none, or unreadable)."""
    try:
        raw = json.loads((data_dir / PROXY_SEEN).read_text(encoding="utf-8"))
        return ProxySeen(at_ms=parse_instant(raw["at"]), peer=str(raw["peer"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def proxy_seen_recorder(data_dir: Path, now_ms: Callable[[], int]) -> Callable[[str], None]:
    """A callable for each untrusted ``X-Forwarded-For`` request's peer that logs and
    records the first one only (so it costs nothing per request after that)."""
    done = False

    def note(peer: str) -> None:
        nonlocal done
        if done:
            return
        done = True
        log.warning(
            "a request from %s carried X-Forwarded-For but trust_proxy is 0: if a reverse"
            " proxy is in front, set trust_proxy to the number of proxies",
            peer,
        )
        try:
            record_proxy_seen(data_dir, ProxySeen(at_ms=now_ms(), peer=peer))
        except OSError as exc:
            log.warning("could not record it in %s: %s", data_dir, exc)

    return note
