"""A tenant's runs across all its schedules, found by filter: ``GET /v1/runs`` (the
dead-letter view is ``state=failed``) and the filter form of ``POST /v1/runs/replay``.

Rules this module guards:

- **Newest first, keyset-paged.** Runs come in ``(scheduled_for, id)`` order, descending;
  a page continues strictly below the last ``(scheduled_for, id)`` it returned, so rows
  added or removed between pages are never skipped or repeated.
- **Every page is a bounded index range.** One range per state asked for
  (``job_runs_tenant_state_time``) — every state when none is asked for, since the
  tenant's runs have no index of their own (one fewer for the planner to write:
  bench/HISTORY.md, "Planner indexes") — or one of a schedule's runs (its unique
  ``(schedule_id, scheduled_for)`` index); each is read in order and limited to the
  page, and the ranges are merged. One ``state IN (…) ORDER BY`` would sort every
  matching row first.
- **Several ranges read keys first**: each range reads ``(scheduled_for, id)`` from its
  index entries (the table only for a filter on the row), the page's keys are merged,
  and only their rows are read, by id.
- ``since`` (inclusive) and ``until`` (exclusive) bound ``scheduled_for`` inside the range;
  ``http_status`` (the run's last status) and ``as_of`` (last changed at or before) filter
  the rows of the range.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from appliance.core.runs import RunState
from appliance.store.infra.connection import Connection
from appliance.store.runs import RUN_COLUMNS, RunRecord

Position = tuple[int, str]  # (scheduled_for, id) of the last run of the previous page


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFilter:
    states: frozenset[RunState] = frozenset()  # empty: every state
    schedule_id: str | None = None
    since: int | None = None  # scheduled_for >= since (epoch ms)
    until: int | None = None  # scheduled_for < until (epoch ms)
    http_status: int | None = None  # last_status


def search_runs(
    conn: Connection,
    *,
    tenant_id: str,
    where: RunFilter,
    limit: int,
    before: Position | None = None,
    as_of: int | None = None,
) -> list[RunRecord]:
    """The tenant's runs matching ``where``, newest first, at most ``limit``, strictly
    below ``before``; with ``as_of``, only runs last changed at or before it."""
    states: list[RunState | None] = [*sorted(where.states)]
    if not where.states:  # one schedule's runs: one range; a tenant's: one per state
        states = [None] if where.schedule_id is not None else [*sorted(RunState)]
    if len(states) == 1:
        sql, params = _range(tenant_id, where, states[0], limit, before, as_of, RUN_COLUMNS.select)
        return RUN_COLUMNS.all(conn.execute(sql, params))
    # Several ranges: their keys first (index entries only, unless a filter reads the row),
    # then the rows of the page's keys alone.
    keys = heapq.nlargest(
        limit,
        itertools.chain.from_iterable(
            conn.execute(*_range(tenant_id, where, state, limit, before, as_of, _KEYS))
            for state in states
        ),
    )
    if not keys:
        return []
    found = conn.execute(
        f"SELECT {RUN_COLUMNS.select} FROM job_runs WHERE id IN ({', '.join('?' * len(keys))})",
        [run_id for _, run_id in keys],
    )
    return sorted(RUN_COLUMNS.all(found), key=lambda r: (r.scheduled_for, r.id), reverse=True)


_KEYS = "scheduled_for, id"


def _range(
    tenant_id: str,
    where: RunFilter,
    state: RunState | None,
    limit: int,
    before: Position | None,
    as_of: int | None,
    columns: str,
) -> tuple[str, list[object]]:
    """One range's statement and parameters, newest first, at most ``limit`` rows."""
    until = where.until
    if before is not None and until is not None:
        # One upper bound, so the index range starts at it: the cursor implies
        # scheduled_for <= before[0], and until implies the cursor when it is lower.
        if before[0] < until:
            until = None
        else:
            before = None
    clauses, params = ["tenant_id = ?"], [tenant_id]
    optional: list[tuple[str, object]] = [
        ("state = ?", None if state is None else state.value),
        ("schedule_id = ?", where.schedule_id),
        ("scheduled_for >= ?", where.since),
        ("scheduled_for < ?", until),
        ("last_status = ?", where.http_status),
        ("updated_at <= ?", as_of),
    ]
    for clause, value in optional:
        if value is not None:
            clauses.append(clause)
            params.append(value)  # type: ignore[arg-type]
    if before is not None:
        clauses.append("(scheduled_for, id) < (?, ?)")
        params.extend(before)  # type: ignore[arg-type]
    sql = (
        f"SELECT {columns} FROM job_runs WHERE {' AND '.join(clauses)}"
        " ORDER BY scheduled_for DESC, id DESC LIMIT ?"
    )
    return sql, [*params, limit]
