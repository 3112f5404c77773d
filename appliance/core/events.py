"""Event types (docs/architecture.md, "Events"). Events are append-only rows with a
per-database sequence."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class EventType(enum.StrEnum):
    RUN_SUCCEEDED = "schedule.run.succeeded"  # "we saw a 2xx", not "the effect happened once"
    RUN_RETRYING = "schedule.run.retrying"
    RUN_FAILED = "schedule.run.failed"
    RUN_MISSED = "schedule.run.missed"
    SCHEDULE_CREATED = "schedule.created"
    SCHEDULE_UPDATED = "schedule.updated"
    SCHEDULE_PAUSED = "schedule.paused"
    SCHEDULE_RESUMED = "schedule.resumed"
    SCHEDULE_DELETED = "schedule.deleted"
    SCHEDULE_PAUSED_BY_RECEIVER = "schedule.paused_by_receiver"
    CLOCK_JUMP_DETECTED = "clock.jump_detected"


JsonScalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    seq: int
    id: str
    tenant_id: str
    type: EventType
    schedule_id: str | None
    run_id: str | None
    occurred_at: int
    data: dict[str, JsonScalar]
