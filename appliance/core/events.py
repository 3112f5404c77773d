"""Event types (docs/architecture.md, "Events").

Events are append-only rows with a per-database sequence. An event written for a change
a tenant asked for names its ``actor`` (the API key, or a web UI user; an operator's
suspend or resume from the web UI names the operator); the engine's own
events (run outcomes, misses, clock jumps, restarts) have none. The same
events are the tenant's audit trail: ``schedule.updated`` lists the fields it changed, and
every key, secret and user change is an event naming who made it (the operator's command
line is the actor ``operator:cli``), never carrying a key or a secret.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from appliance.errors import FieldError


class EventType(enum.StrEnum):
    RUN_SUCCEEDED = "schedule.run.succeeded"  # "we saw a 2xx", not "the effect happened once"
    RUN_RETRYING = "schedule.run.retrying"
    RUN_FAILED = "schedule.run.failed"
    RUN_MISSED = "schedule.run.missed"
    RUN_RESENT = "schedule.run.resent"  # a copy of a run under a new key (store/usecases/resend.py)
    SCHEDULE_CREATED = "schedule.created"
    SCHEDULE_UPDATED = "schedule.updated"
    SCHEDULE_PAUSED = "schedule.paused"
    SCHEDULE_RESUMED = "schedule.resumed"
    SCHEDULE_DELETED = "schedule.deleted"
    SCHEDULE_PAUSED_BY_RECEIVER = "schedule.paused_by_receiver"
    SCHEDULE_DEDUPE_TESTED = "schedule.dedupe_tested"  # a dedupe test's two answers
    CLOCK_JUMP_DETECTED = "clock.jump_detected"
    APPLIANCE_RESTARTED = "appliance.restarted"  # the downtime report (core/downtime.py)
    BREAKER_OPENED = "target.breaker_opened"  # an origin failed too often: left alone
    BREAKER_CLOSED = "target.breaker_closed"  # its probe succeeded: delivering again
    SECRET_REVEALED = "signing_secret.revealed"  # an owner was shown a secret whole
    TENANT_SUSPENDED = "tenant.suspended"  # by an operator (store/suspension.py)
    TENANT_RESUMED = "tenant.resumed"
    STREAM_REFUSED = "stream.refused"  # a live stream over a cap (live/limits.py)
    API_KEY_CREATED = "api_key.created"  # never the key (store/api_keys.py)
    API_KEY_REVOKED = "api_key.revoked"
    SECRET_ROTATED = "signing_secret.rotated"  # never the secret (store/tenants.py)
    SECRET_REVOKED = "signing_secret.revoked"  # one active secret expired at once
    NOTIFICATIONS_UPDATED = "notifications.updated"  # the URL set or removed (origin only)
    USER_INVITED = "user.invited"  # store/invitations.py
    USER_CREATED = "user.created"  # an account: an invitation used, or the operator's CLI
    USER_SIGNED_IN = "user.signed_in"  # a web UI sign-in (store/sessions.py)
    USER_SIGN_IN_FAILED = "user.sign_in_failed"  # a counted attempt at a tenant's user
    USER_ROLE_CHANGED = "user.role_changed"  # store/people.py
    USER_REMOVED = "user.removed"  # the account deleted, its sessions ended
    USER_RESET = "user.reset"  # a new setup link issued, sessions ended
    USER_PASSWORD_CHANGED = "user.password_changed"  # by the user, current password given
    USER_SESSIONS_ENDED = "user.sessions_ended"  # the user ended their other sessions


JsonScalar = str | int | float | bool | None
JsonValue = JsonScalar | list[str]  # an event's data: scalars, or a list of names


class ActorKind(enum.StrEnum):
    API_KEY = "api_key"
    USER = "user"  # a web UI user (usr_…)
    OPERATOR = "operator"  # the operator's command line (id ``cli``)


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """Who asked for a change: ``{"kind": "api_key", "id": "key_…"}`` on the wire."""

    kind: ActorKind
    id: str

    @classmethod
    def api_key(cls, key_id: str) -> Actor:
        return cls(kind=ActorKind.API_KEY, id=key_id)

    @classmethod
    def user(cls, user_id: str) -> Actor:
        return cls(kind=ActorKind.USER, id=user_id)

    @classmethod
    def operator(cls) -> Actor:
        """The ``steeple`` command line, run by whoever operates the box."""
        return cls(kind=ActorKind.OPERATOR, id="cli")

    def text(self) -> str:
        """The stored form, ``kind:id``."""
        return f"{self.kind}:{self.id}"

    @classmethod
    def parse(cls, text: str) -> Actor:
        kind, _, actor_id = text.partition(":")
        return cls(kind=ActorKind(kind), id=actor_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    seq: int
    id: str
    tenant_id: str
    type: EventType
    schedule_id: str | None
    run_id: str | None
    occurred_at: int
    data: dict[str, JsonValue]
    actor: Actor | None = None


MAX_SEQ = 2**63 - 1  # an event's seq is a SQLite INTEGER, a PostgreSQL BIGINT
SEQ_RULE = f"must be an event seq: a whole number from 0 to {MAX_SEQ}"


def parse_seq(text: str) -> int | None:
    """An event ``seq`` (a cursor: ``?after=``, ``Last-Event-ID``) written as ASCII digits,
    0 to :data:`MAX_SEQ`; None for anything else — a sign, other scripts' digits, or more
    digits than a seq has (checked before ``int``, which refuses 4,301 of them)."""
    if text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= MAX_SEQ:
        return int(text)
    return None


def read_cursor(text: str | None, errors: list[FieldError], *, field: str = "after") -> int:
    """The seq in ``text`` (absent or empty: 0, the feed's start); else 0, and an error
    naming ``field`` appended to ``errors`` (the API's and the UI's feeds and streams)."""
    if not text:
        return 0
    seq = parse_seq(text)
    if seq is None:
        errors.append(FieldError(field=field, message=SEQ_RULE))
        return 0
    return seq
