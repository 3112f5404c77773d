"""The JSON shapes of schedules, runs, attempts and previews (what the OpenAPI file draws).

Instants are RFC 3339 UTC text (``format_instant``); ``scheduled_for`` uses the canonical
second-precision form that is also ``X-Scheduled-For`` (ADR 0037). A schedule echoes its
``payload`` as parsed JSON or its ``body`` as the exact string given.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import attrgetter
from typing import Final

from appliance.core.instants import format_instant, format_scheduled_for
from appliance.core.jitter import planned_timing
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.request_input import body_field
from appliance.core.schedule_batch import timing_key
from appliance.core.schedule_input import schedule_document
from appliance.core.schedules import Schedule, ScheduleSpec, schedule_status
from appliance.store.runs import AttemptRecord, RunRecord

NEXT_RUNS = 5


def render_schedule(
    schedule: Schedule, *, now: int, shared: OccurrenceCache | None = None
) -> dict[str, object]:
    """``shared``: the app's occurrence cache (``ApiContext.upcoming``), so schedules with
    the same expression and timezone compute their next runs, and format them, once. None
    inside a write transaction, which runs on the writer thread: the cache is the loop's."""
    return _document(schedule, next_runs(schedule, now=now, shared=shared))


def render_schedules(
    schedules: Sequence[Schedule], *, now: int, shared: OccurrenceCache | None = None
) -> list[dict[str, object]]:
    """``render_schedule`` of each. The next runs of a schedule without jitter depend on
    its timing alone, not on its id: they are worked out once per distinct timing (a
    batch's schedules share a few), and the documents share them."""
    by_timing: dict[tuple[object, ...], list[dict[str, str]]] = {}
    # Specs alike but for name and body (most of a batch's): one document, copied.
    alike: dict[tuple[object, ...], dict[str, object]] = {}
    documents = []
    for schedule in schedules:
        spec = schedule.spec
        if spec.jitter_seconds:
            runs = next_runs(schedule, now=now, shared=shared)
        else:
            key = (*timing_key(spec), spec.paused, schedule.next_fire_at is None)
            found = by_timing.get(key)
            if found is None:
                found = by_timing[key] = next_runs(schedule, now=now, shared=shared)
            runs = found
        rest = _rest_of(spec)
        like = alike.get(rest)
        if like is None:
            fields = alike[rest] = schedule_document(spec)
        else:
            fields = {**like, "name": spec.name, "key": spec.key}
            body = body_field(spec)
            if body is not None:
                fields[body[0]] = body[1]
        documents.append(_document(schedule, runs, fields))
    return documents


# A spec's fields but its name, key and body: equal for specs whose documents differ in those.
_rest_of: Final = attrgetter(
    *(name for name in ScheduleSpec.__dataclass_fields__ if name not in ("name", "key", "body"))
)


def _document(
    schedule: Schedule, runs: list[dict[str, str]], fields: dict[str, object] | None = None
) -> dict[str, object]:
    document: dict[str, object] = {"id": schedule.id}
    document.update(schedule_document(schedule.spec) if fields is None else fields)
    document["version"] = schedule.version
    document["created_at"] = format_instant(schedule.created_at)
    document["updated_at"] = format_instant(schedule.updated_at)
    document["status"] = schedule_status(schedule).value
    document["next_runs"] = runs
    return document


def next_runs(
    schedule: Schedule,
    *,
    now: int,
    count: int = NEXT_RUNS,
    shared: OccurrenceCache | None = None,
) -> list[dict[str, str]]:
    """The next ``count`` planned occurrences after ``now`` (none while paused or once
    completed), from the same function the planner uses, so ``due_at`` includes the same
    jitter."""
    if schedule.spec.paused:
        return []
    spec = schedule.spec
    text = format_scheduled_for if shared is None else shared.text
    if schedule.next_fire_at is None:
        return []  # completed: nothing more is planned
    planned = planned_timing(
        spec,
        schedule_id=schedule.id,
        jitter_seconds=spec.jitter_seconds,
        after_ms=now,
        shared=shared,
    )
    return [
        {
            "scheduled_for": text(occurrence.scheduled_for),
            # Without jitter due_at is the whole second itself, whose RFC 3339 text is the
            # canonical one (format_instant drops zero milliseconds).
            "due_at": (
                text(occurrence.due_at)
                if occurrence.due_at == occurrence.scheduled_for
                else format_instant(occurrence.due_at)
            ),
        }
        for occurrence in itertools.islice(planned, count)
    ]


def render_run(run: RunRecord) -> dict[str, object]:
    return {
        "id": run.id,
        "schedule_id": run.schedule_id,
        "schedule_version": run.schedule_version,
        "scheduled_for": format_scheduled_for(run.scheduled_for),
        "due_at": format_instant(run.due_at),
        "state": run.state.value,
        "trigger": run.trigger.value,
        "attempt": run.attempt,
        "idempotency_key": run.idempotency_key,
        "last_status": run.last_status,
        "last_error": run.last_error,
        "failure_reason": run.failure_reason,
        "created_at": format_instant(run.created_at),
        "updated_at": format_instant(run.updated_at),
        "finished_at": _instant(run.finished_at),
        "resend_of": run.resend_of,
    }


def render_run_with_attempts(run: RunRecord, attempts: list[AttemptRecord]) -> dict[str, object]:
    document = render_run(run)
    document["attempts"] = [render_attempt(attempt) for attempt in attempts]
    return document


def render_attempt(attempt: AttemptRecord) -> dict[str, object]:
    return {
        "attempt": attempt.attempt,
        "started_at": format_instant(attempt.started_at),
        "finished_at": _instant(attempt.finished_at),
        "outcome": attempt.outcome.value if attempt.outcome is not None else None,
        "http_status": attempt.http_status,
        "error": attempt.error,
        "latency_ms": attempt.latency_ms,
        "response_excerpt": attempt.response_excerpt,
        "reclaimed_at": _instant(attempt.reclaimed_at),
    }


def _instant(ms: int | None) -> str | None:
    return format_instant(ms) if ms is not None else None
