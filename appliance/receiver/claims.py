"""The two-phase record of a key, and the one rule every deduper applies to it.

A deduper records each idempotency key in one of two states:

- **in progress** — a handler is running for the key. The record holds the key until
  ``expires_at_s`` and carries the handling's ``token``. If the process dies, nothing
  clears it: it simply expires, and the next redelivery takes the key over and runs the
  handler again. Nothing is lost.
- **done** — the handler returned: every later delivery of the key is a duplicate.

What a new delivery of a key meets (:func:`decide`):

    record                                 seen          the receiver
    none                                   NEW           runs the handler
    in progress, expires_at_s <= now_s     NEW           runs it again (taken over)
    in progress, expires_at_s >  now_s     IN_PROGRESS   answers non-2xx (409), never 2xx
    done                                   DONE          answers 2xx, does not run it

A handler that raises releases its in-progress record at once (only its own: the token is
compared), so the next redelivery runs it again. A handler that returns makes the record
done whoever holds it: the effect happened. An effect can still run twice in two cases,
which is why effects that live in a database should use the transactional pattern
(:meth:`appliance.receiver.SqliteDeduper.once`) instead: the process dies between the
effect and the done record, or a handler outlives ``hold_s`` and a redelivery takes over.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from typing import Protocol


class Seen(enum.Enum):
    """What a deduper knew of a key when a delivery claimed it."""

    NEW = "new"  # not recorded, or an expired in-progress record: this delivery holds it now
    IN_PROGRESS = "in_progress"  # another handling holds the key until ``expires_at_s``
    DONE = "done"  # handled already: a duplicate


class State(enum.Enum):
    """A recorded key's state (the column value in :class:`SqliteDeduper`'s table)."""

    IN_PROGRESS = "in_progress"
    DONE = "done"


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """What a deduper stores per key."""

    state: State
    token: str  # the holding handling's token; "" once done
    expires_at_s: int  # when an in-progress hold ends; 0 once done


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The answer to one claim of a key. ``token`` identifies this handling (``seen`` NEW)
    so that finishing or releasing it touches only its own record. ``expires_at_s`` is when
    this handling's hold ends (NEW) or the other one's does (IN_PROGRESS); 0 for DONE."""

    key: str
    seen: Seen
    token: str = ""
    expires_at_s: int = 0


class DeliveryInProgress(Exception):
    """Another handling of this key is still running. Answer non-2xx — 409 with
    ``Retry-After: retry_after_s`` — so Steeple tries again: a 2xx would mark the run
    succeeded before its effect is certain."""

    def __init__(self, key: str, *, retry_after_s: int) -> None:
        super().__init__(f"delivery {key} is being handled; retry in {retry_after_s} s")
        self.key = key
        self.retry_after_s = retry_after_s


def new_token() -> str:
    """A random handling token (128 bits)."""
    return os.urandom(16).hex()


def decide(key: str, record: Record | None, *, now_s: int, hold_s: int, token: str) -> Claim:
    """The table above: what a delivery of ``key`` claiming at ``now_s`` gets. If it is
    NEW, the caller stores ``in_progress_record(claim)`` in the same atomic step."""
    if record is None or (record.state is State.IN_PROGRESS and record.expires_at_s <= now_s):
        return Claim(key=key, seen=Seen.NEW, token=token, expires_at_s=now_s + hold_s)
    if record.state is State.DONE:
        return Claim(key=key, seen=Seen.DONE)
    return Claim(key=key, seen=Seen.IN_PROGRESS, expires_at_s=record.expires_at_s)


def in_progress_record(claim: Claim) -> Record:
    """The record a NEW claim stores."""
    return Record(state=State.IN_PROGRESS, token=claim.token, expires_at_s=claim.expires_at_s)


DONE_RECORD = Record(state=State.DONE, token="", expires_at_s=0)


def check_hold(hold_s: int) -> None:
    if hold_s < 1:
        raise ValueError(f"hold_s must be at least 1 second, got {hold_s}")


class Deduper(Protocol):
    """Records idempotency keys in two phases (this module's table). Implementations must
    make :meth:`claim` atomic: two concurrent claims of one key never both get NEW unless
    the first one's hold has expired."""

    def claim(self, key: str, *, now_s: int, hold_s: int) -> Claim:
        """Look ``key`` up and, if the answer is NEW, hold it in progress until
        ``now_s + hold_s``."""
        ...

    def finish(self, claim: Claim, *, now_s: int) -> None:
        """The handler of a NEW claim returned: record the key done."""
        ...

    def release(self, claim: Claim) -> None:
        """The handler of a NEW claim raised: drop its in-progress record if it still holds
        it, so the next delivery runs the handler again."""
        ...

    def forget(self, key: str) -> None:
        """Drop any record of ``key`` (before asking Steeple for a replay you want acted on)."""
        ...
