"""Identifiers: prefixed ULIDs, and the two identities derived from an occurrence (ADR 0037).

- ``ten_``, ``sch_``, ``key_``, ``evt_``, ``sec_``, ``inc_`` ids are ULIDs: 48-bit epoch ms +
  80 random bits, 26 Crockford base32 characters.
- ``idempotency_key`` = lowercase hex SHA-256 of UTF-8 ``schedule_id`` immediately followed
  by UTF-8 canonical ``scheduled_for`` text. Stable across attempts, reclaims and replays.
- ``run_id`` = ``run_`` + a ULID whose 48-bit time is the occurrence's ``scheduled_for``
  (epoch ms) and whose 80 other bits are the first 10 bytes of
  SHA-256(``"run:" + schedule_id + scheduled_for``): a run re-created after a restore keeps
  its id, and the runs of one instant are neighbours in every index keyed by run id (the
  planner appends to them instead of writing a random page per run).
- :func:`occurrence_ids` derives both for one occurrence: the one place a run's identity
  is computed (``core.runs.occurrence_run`` builds every new run's row with it).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
from collections.abc import Callable

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID_BODY = frozenset(CROCKFORD)


_PAIRS = tuple(high + low for high in CROCKFORD for low in CROCKFORD)  # 10 bits each


def _base32(value: int, length: int) -> str:
    """``value`` (< 32**length) as ``length`` Crockford characters, most significant first
    (even ``length``: ids are 26). Two characters per table look-up: cheaper than
    ``base64.b32encode``, which is pure Python on 3.11 — the planner derives one run id per
    occurrence (bench/HISTORY.md, "Costs once quoted in code comments")."""
    return "".join(_PAIRS[(value >> shift) & 0x3FF] for shift in range(5 * length - 10, -1, -10))


def new_ulid(now_ms: int, randbytes: Callable[[int], bytes] = os.urandom) -> str:
    """A 26-character ULID for ``now_ms`` (milliseconds since the epoch)."""
    if not 0 <= now_ms < 1 << 48:
        raise ValueError(f"ULID timestamp out of range: {now_ms}")
    value = (now_ms << 80) | int.from_bytes(randbytes(10), "big")
    return _base32(value, 26)


def new_id(prefix: str, now_ms: int, randbytes: Callable[[int], bytes] = os.urandom) -> str:
    """A prefixed id such as ``sch_01JDQ8Y5Z2M4X7K9P3R6T8V0WB``."""
    return f"{prefix}_{new_ulid(now_ms, randbytes)}"


def new_ids(
    prefix: str, now_ms: int, count: int, randbytes: Callable[[int], bytes] = os.urandom
) -> list[str]:
    """``count`` prefixed ids of one instant, as :func:`new_id` makes them one by one: their
    first 10 characters (the 2 zero bits and 48 of time) are one text, the other 16 the
    80 random bits of each, drawn at once (a batch creates a thousand schedules and
    events)."""
    if not 0 <= now_ms < 1 << 48:
        raise ValueError(f"ULID timestamp out of range: {now_ms}")
    head = f"{prefix}_{_base32(now_ms, 10)}"
    drawn = randbytes(10 * count)
    return [
        head + _base32(int.from_bytes(drawn[i : i + 10], "big"), 16)
        for i in range(0, 10 * count, 10)
    ]


def looks_like(prefix: str, value: str) -> bool:
    """Whether ``value`` has the shape ``<prefix>_`` + 26 Crockford characters."""
    head, sep, body = value.partition("_")
    return head == prefix and sep == "_" and len(body) == 26 and set(body) <= _ULID_BODY


def idempotency_key(schedule_id: str, scheduled_for_text: str) -> str:
    """The delivery's ``X-Idempotency-Key`` (and the Standard Webhooks message id)."""
    return hashlib.sha256((schedule_id + scheduled_for_text).encode("utf-8")).hexdigest()


def run_id(schedule_id: str, scheduled_for_text: str) -> str:
    """The derived id of the run for one occurrence, in occurrence order."""
    digest = hashlib.sha256(("run:" + schedule_id + scheduled_for_text).encode("utf-8")).digest()
    instant = _canonical_ms(scheduled_for_text) % (1 << 48)  # 48 bits, as a ULID's time
    return "run_" + _base32_26(instant << 80 | int.from_bytes(digest[:10], "big"))


@functools.lru_cache(maxsize=4096)  # a planner pass's runs share a few instants
def _canonical_ms(text: str) -> int:
    """Epoch ms of canonical ``scheduled_for`` text (``YYYY-MM-DDTHH:MM:SSZ``, UTC)."""
    when = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return int(when.timestamp()) * 1000


def _base32_26(v: int, p: tuple[str, ...] = _PAIRS) -> str:
    """``_base32(v, 26)`` unrolled: the planner derives one run id per occurrence, and the
    generator's steps cost more than the look-ups (bench/HISTORY.md, "Costs once quoted in
    code comments")."""
    return "".join((
        p[v >> 120], p[v >> 110 & 1023], p[v >> 100 & 1023], p[v >> 90 & 1023],
        p[v >> 80 & 1023], p[v >> 70 & 1023], p[v >> 60 & 1023], p[v >> 50 & 1023],
        p[v >> 40 & 1023], p[v >> 30 & 1023], p[v >> 20 & 1023], p[v >> 10 & 1023],
        p[v & 1023],
    ))  # fmt: skip


def occurrence_ids(schedule_id: str, scheduled_for_text: str) -> tuple[str, str]:
    """``(run id, idempotency key)`` of the occurrence of ``schedule_id`` at the canonical
    ``scheduled_for`` text (``core.instants.format_scheduled_for``)."""
    return run_id(schedule_id, scheduled_for_text), idempotency_key(schedule_id, scheduled_for_text)
