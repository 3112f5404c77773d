"""What one page shows when it spans several subjects, read in one snapshot: a schedule's
runs (``GET /v1/schedules/{id}/runs``), and the web UI's dashboard, schedule list,
schedule page and run page (docs/ui.md, "Pages").

Rules this module guards:

- Each function is one read the caller runs in one read transaction: what a page shows
  is one consistent state (a schedule's runs are the runs of the schedule shown, a run's
  attempts are the run's as shown).
- Every read is scoped by tenant: another tenant's schedule or run is NotFound, exactly
  like a missing one.
- Records are read through their subjects' own functions (``get_schedule``,
  ``list_runs``, …), so a page shows the same values the API renders.
- A run is shown by its schedule's name (:func:`schedule_names`), read in the same
  snapshot: only the tenant's schedules are named, a deleted one by the name it had; the
  ids stay beside the names (docs/ui.md, "Names, not ids").
- The run page and the schedule page carry the newest ``seq`` of the tenant's feed read
  in the same snapshot (:func:`appliance.store.events.newest_feed_seq`): the page's live
  stream starts after it, so no event after what the page shows goes unseen
  (docs/ui.md, "Live pages").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from appliance.core.schedules import Schedule
from appliance.store import overview, pauses
from appliance.store import runs as run_store
from appliance.store.events import newest_feed_seq
from appliance.store.figures.tenants import Counts, counts
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection
from appliance.store.run_search import RunFilter, search_runs
from appliance.store.runs import AttemptRecord, RunRecord
from appliance.store.schedules import get_schedule, require_schedule


def schedule_runs(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_id: str,
    limit: int,
    before_scheduled_for: int | None = None,
) -> list[RunRecord]:
    """A page of the runs of the tenant's live schedule, newest occurrence first
    (:func:`appliance.store.runs.list_runs`); NotFound when the schedule is missing,
    deleted or another tenant's — never an empty page for it."""
    require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    return run_store.list_runs(
        conn,
        tenant_id=tenant_id,
        schedule_id=schedule_id,
        limit=limit,
        before_scheduled_for=before_scheduled_for,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPage:
    run: RunRecord
    attempts: list[AttemptRecord]
    zone: str  # the schedule's time zone; UTC once the schedule is deleted
    schedule_name: str | None  # the name it has, or had before it was deleted
    newest_seq: int  # the tenant's newest event as of this read: the live stream's start


def run_page(conn: Connection, *, tenant_id: str, run_id: str) -> RunPage:
    """The tenant's run, its attempts and the time zone its instants are shown in;
    NotFound for a missing run or another tenant's. A run outlives its deleted schedule:
    its page then shows UTC."""
    run, attempts = run_store.run_with_attempts(conn, tenant_id=tenant_id, run_id=run_id)
    schedule = get_schedule(conn, tenant_id=tenant_id, schedule_id=run.schedule_id)
    zone = "UTC" if schedule is None else schedule.spec.timezone
    names = schedule_names(conn, tenant_id=tenant_id, schedule_ids=[run.schedule_id])
    return RunPage(
        run=run,
        attempts=attempts,
        zone=zone,
        schedule_name=names.get(run.schedule_id),
        newest_seq=newest_feed_seq(conn, tenant_id=tenant_id),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulePage:
    schedule: Schedule
    runs: list[RunRecord]  # newest occurrence first
    paused_note: str | None  # the note of the pause in force; None when not paused
    newest_seq: int  # the tenant's newest event as of this read: the live stream's start


def schedule_page(conn: Connection, *, tenant_id: str, schedule_id: str, runs: int) -> SchedulePage:
    """The tenant's live schedule (NotFound otherwise), its newest ``runs`` runs and,
    while it stays paused, the note of its pause."""
    schedule = require_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id)
    listed = run_store.list_runs(conn, tenant_id=tenant_id, schedule_id=schedule_id, limit=runs)
    note = (
        pauses.pause_note(conn, tenant_id=tenant_id, schedule_id=schedule_id)
        if schedule.spec.paused
        else None
    )
    return SchedulePage(
        schedule=schedule,
        runs=listed,
        paused_note=note,
        newest_seq=newest_feed_seq(conn, tenant_id=tenant_id),
    )


def schedule_list(
    conn: Connection,
    *,
    tenant_id: str,
    status: overview.Status,
    name_contains: str,
    limit: int,
    after_id: str | None = None,
) -> list[tuple[Schedule, RunRecord | None]]:
    """A page of the tenant's live schedules by id (:func:`appliance.store.overview.
    find_schedules`), each with its last outcome (None: no run finished yet)."""
    found = overview.find_schedules(
        conn,
        tenant_id=tenant_id,
        status=status,
        name_contains=name_contains,
        limit=limit,
        after_id=after_id,
    )
    return [(s, overview.last_outcome(conn, schedule_id=s.id)) for s in found]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dashboard:
    counts: Counts
    soonest: list[Schedule]  # the live, unpaused schedules that fire soonest, soonest first
    attention: list[RunRecord]  # failed or missed in the last 24 h, newest first
    schedule_names: dict[str, str]  # the attention runs' schedules' names, by id


def dashboard(
    conn: Connection, *, tenant_id: str, now: int, soonest: int, attention: int
) -> Dashboard:
    """The tenant's counts, its ``soonest`` schedules due next and its ``attention``
    newest runs that failed or were missed."""
    failed = overview.attention(conn, tenant_id=tenant_id, now=now, limit=attention)
    return Dashboard(
        counts=counts(conn, tenant_id=tenant_id, now=now),
        soonest=overview.next_due(conn, tenant_id=tenant_id, limit=soonest),
        attention=failed,
        schedule_names=schedule_names(
            conn, tenant_id=tenant_id, schedule_ids=(r.schedule_id for r in failed)
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunList:
    runs: list[RunRecord]  # newest first
    schedule_names: dict[str, str]  # their schedules' names, by id


def run_list(conn: Connection, *, tenant_id: str, where: RunFilter, limit: int) -> RunList:
    """The tenant's runs matching ``where`` (:func:`appliance.store.run_search.
    search_runs`), each with its schedule's name."""
    found = search_runs(conn, tenant_id=tenant_id, where=where, limit=limit)
    names = schedule_names(conn, tenant_id=tenant_id, schedule_ids=(r.schedule_id for r in found))
    return RunList(runs=found, schedule_names=names)


def schedule_names(
    conn: Connection, *, tenant_id: str, schedule_ids: Iterable[str]
) -> dict[str, str]:
    """The names of the tenant's schedules among ``schedule_ids``, deleted ones included
    (a run outlives its schedule); another tenant's id is never named. One query."""
    wanted = sorted(set(schedule_ids))
    if not wanted:
        return {}
    marks = ", ".join("?" for _ in wanted)
    found = conn.execute(
        f"SELECT id, name FROM schedules WHERE tenant_id = ? AND id IN ({marks})",
        (tenant_id, *wanted),
    )
    return {rows.text(i): rows.text(name) for i, name in found}
