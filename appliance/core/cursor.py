"""Where a schedule's cursor starts when its timing is set — on create, on resume, on an
edit that re-plans (``store.schedules``; ADR 0033 "Planning"): the first
planned occurrence strictly after now. Pure: no database.

An interval without ``start_at`` is anchored at now's second, and the anchor is stored so
it never moves (core.timing). A timing that would never fire again is refused (422),
naming the field to change, rather than stored as already completed.
"""

from __future__ import annotations

from dataclasses import replace

from appliance.core.jitter import planned_timing
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.schedules import ScheduleSpec
from appliance.core.timing import ScheduleKind, default_anchor, kind_of
from appliance.errors import ValidationError


def first_fire_at(
    spec: ScheduleSpec, *, schedule_id: str, now: int, shared: OccurrenceCache | None = None
) -> int | None:
    """The ``scheduled_for`` of the first planned occurrence strictly after ``now``.
    ``shared``: the caller's occurrence cache (a batch's specs share their timings)."""
    occurrences = planned_timing(
        spec,
        schedule_id=schedule_id,
        jitter_seconds=spec.jitter_seconds,
        after_ms=now,
        shared=shared,
    )
    first = next(occurrences, None)
    return first.scheduled_for if first is not None else None


def anchored(spec: ScheduleSpec, *, now: int) -> ScheduleSpec:
    """``spec`` with an interval's anchor set: ``start_at`` defaults to ``now``'s second,
    stored so the anchor never moves (core.timing)."""
    if spec.every_seconds is None or spec.start_at is not None:
        return spec
    return replace(spec, start_at=default_anchor(now))


def first_fire_or_refuse(
    spec: ScheduleSpec, *, schedule_id: str, now: int, shared: OccurrenceCache | None = None
) -> int:
    """The new cursor of a schedule whose timing is being set; a timing that would never
    fire after ``now`` is refused (422) rather than stored as already completed."""
    cursor = first_fire_at(spec, schedule_id=schedule_id, now=now, shared=shared)
    if cursor is not None:
        return cursor
    if kind_of(spec) is ScheduleKind.AT:
        raise ValidationError.single("at", "is not after now; a one-off must lie in the future")
    raise ValidationError.single(
        "end_at", "leaves no occurrence after now; move it later or remove it"
    )
