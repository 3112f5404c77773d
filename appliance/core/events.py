"""Event types (docs/architecture.md, "Events").

Events are append-only rows with a per-database sequence. An event written for a change
a tenant asked for names its ``actor`` (the API key, or a web UI user; an operator's
suspend or resume from the web UI names the operator); the engine's own
events (run outcomes, misses, clock jumps, restarts) have none. The same
events are the tenant's audit trail: ``schedule.updated`` lists the fields it changed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class EventType(enum.StrEnum):
    RUN_SUCCEEDED = "schedule.run.succeeded"  # "we saw a 2xx", not "the effect happened once"
    RUN_RETRYING = "schedule.run.retrying"
    RUN_FAILED = "schedule.run.failed"
    RUN_MISSED = "schedule.run.missed"
    RUN_RESENT = "schedule.run.resent"  # a copy of a run under a new key (store/resend.py)
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
    USER_SIGNED_IN = "user.signed_in"  # a web UI sign-in (store/sessions.py)
    USER_SIGN_IN_FAILED = "user.sign_in_failed"  # a counted attempt at a tenant's user


JsonScalar = str | int | float | bool | None
JsonValue = JsonScalar | list[str]  # an event's data: scalars, or a list of names


class ActorKind(enum.StrEnum):
    API_KEY = "api_key"
    USER = "user"  # a web UI user (usr_…)


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
