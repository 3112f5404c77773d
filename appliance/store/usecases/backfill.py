"""Backfill: materialising a schedule's past occurrences that have no run yet
(docs/schedules.md, "Backfill").

Rules this module guards:

- The occurrences are the schedule's own (``core.timing``, bounds included) with
  ``from <= scheduled_for <= to``; ``to`` may not be in the future (the planner owns what
  is to come). More than ``limit`` of them is refused before anything is written
  (:class:`ValidationError` naming ``max``).
- **The unique index decides.** Every run is inserted ``ON CONFLICT DO NOTHING``
  (:func:`appliance.store.materialise.insert_runs`), with the
  id and key derived from the canonical instant: an occurrence that already has a row —
  delivered, failed, ``missed`` or cancelled — is left alone, and a planner racing the
  backfill can only meet a conflict. Live planning and a backfill never make a second row.
- **Paced, oldest first**, exactly like a bulk replay (:mod:`appliance.store.usecases.manual`):
  the runs become due ``1 / rate_per_second`` apart after the tenant's replayed and
  backfilled runs still waiting, so the claim (earliest ``due_at`` first) never queues a
  live occurrence behind more than a pace's worth of them. Each run's retry window
  starts at its ``due_at`` (``budget_from``), not at its old ``scheduled_for``.
- A dry run reads the same occurrences and rows and writes nothing.
- A backfilled run is an explicit request, like a replay: the overlap gate never skips it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Final

from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.core.schedules import Schedule
from appliance.core.timing import occurrences, previous_occurrence
from appliance.errors import ValidationError
from appliance.store.infra.connection import Connection
from appliance.store.materialise import insert_runs, schedule_body_digest
from appliance.store.schedules import require_schedule
from appliance.store.usecases.manual import paced_start

DEFAULT_MAX: Final = 1_000
MAX_MAX: Final = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Backfill:
    occurrences: int  # in the range
    existing: int  # of those, already with a row: left alone
    materialised: int  # new runs (0 on a dry run: `missing` says how many there would be)
    missing: int  # without a row before this call
    first: int | None  # the first and last missing occurrence
    last: int | None


def backfill(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    start: int,
    end: int,
    limit: int,
    dry_run: bool,
    now: int,
    rate_per_second: int,
) -> Backfill:
    """Materialise (or, ``dry_run``, count) the occurrences in ``[start, end]`` that have
    no run; NotFound for an unknown schedule, ValidationError for a bad range."""
    schedule = require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    if end > now:
        raise ValidationError.single("to", "is in the future; backfill is for past occurrences")
    if end < start:
        raise ValidationError.single("to", "is before from")
    stream = itertools.takewhile(
        lambda ms: ms <= end, occurrences(schedule.spec, after_ms=start - 1)
    )
    wanted = list(itertools.islice(stream, limit + 1))
    if len(wanted) > limit:
        raise ValidationError.single(
            "max",
            f"the range holds more than {limit} occurrences; narrow from/to, or raise max"
            f" (at most {MAX_MAX}) and backfill in parts",
        )
    existing = {
        int(sched)
        for (sched,) in conn.execute(
            "SELECT scheduled_for FROM job_runs WHERE schedule_id = ?"
            " AND scheduled_for BETWEEN ? AND ?",
            (schedule_id, start, end),
        )
    }
    missing = [ms for ms in wanted if ms not in existing]
    if dry_run or not missing:
        created = 0
    else:
        previous = dict(zip(wanted, [_before(schedule, wanted), *wanted], strict=False))
        created = _materialise(
            conn, schedule, [(ms, previous[ms]) for ms in missing], now, rate_per_second
        )
    return Backfill(
        occurrences=len(wanted),
        existing=len(wanted) - len(missing),
        materialised=created,
        missing=len(missing),
        first=missing[0] if missing else None,
        last=missing[-1] if missing else None,
    )


def _before(schedule: Schedule, wanted: list[int]) -> int | None:
    """The occurrence before the range's first, for a payload template (else unused)."""
    return previous_occurrence(schedule.spec, wanted[0]) if schedule.spec.templated else None


def _materialise(
    conn: Connection,
    schedule: Schedule,
    missing: list[tuple[int, int | None]],
    now: int,
    rate: int,
) -> int:
    """Insert the runs of ``missing`` (each occurrence with the one before it), paced."""
    step = 1000 / rate
    first_due = paced_start(conn, schedule.tenant_id, now=now, step=step)
    runs = [
        occurrence_run(
            schedule_id=schedule.id,
            tenant_id=schedule.tenant_id,
            schedule_version=schedule.version,
            scheduled_for=scheduled_for,
            due_at=first_due + int(n * step),
            state=RunState.PENDING,
            trigger=Trigger.SCHEDULE,
            body_digest=schedule_body_digest(
                conn, schedule, scheduled_for=scheduled_for, previous=previous
            ),
        )
        for n, (scheduled_for, previous) in enumerate(missing)
    ]
    created = insert_runs(conn, runs, now=now)
    conn.executemany(
        "UPDATE job_runs SET budget_from = due_at WHERE id = ?", [(rid,) for rid in created]
    )
    return len(created)
