"""Instants: integer epoch milliseconds (UTC) and their RFC 3339 text forms.

``format_scheduled_for`` is part of the delivery contract (ADR 0037): second precision,
``Z`` suffix, e.g. ``2026-08-06T03:00:00Z``. It feeds ``X-Scheduled-For`` and the key.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_datetime(ms: int) -> datetime:
    """An aware UTC datetime for ``ms``."""
    return _EPOCH + timedelta(milliseconds=ms)


def from_datetime(moment: datetime) -> int:
    """Epoch ms of an aware datetime. Naive datetimes are refused."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: an instant needs a UTC offset")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


@functools.lru_cache(maxsize=4096)  # pure; a burst's runs share a handful of seconds
def format_scheduled_for(ms: int) -> str:
    """Canonical text of a ``scheduled_for`` instant. ``ms`` must be a whole second."""
    if ms % 1000:
        raise ValueError(f"scheduled_for must be a whole second, got {ms} ms")
    return to_datetime(ms).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=4096)  # pure; a batch's schedules share their created_at
def format_instant(ms: int) -> str:
    """RFC 3339 UTC text for any instant: seconds if whole, else milliseconds."""
    text = to_datetime(ms).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}Z" if ms % 1000 == 0 else f"{text}.{ms % 1000:03d}Z"


def parse_instant(text: str) -> int:
    """Epoch ms of RFC 3339 text with an explicit offset (``Z`` or ``±hh:mm``).

    Raises ``ValueError`` with a readable message otherwise."""
    candidate = text.strip()
    if "T" not in candidate and "t" not in candidate:
        raise ValueError(
            f"{text!r} is not an RFC 3339 date-time (expected e.g. 2026-08-06T03:00:00Z)"
        )
    if candidate[-1:] in ("z", "Z"):
        candidate = candidate[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(candidate)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an RFC 3339 date-time (expected e.g. 2026-08-06T03:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset; add Z or ±hh:mm")
    return from_datetime(moment)
