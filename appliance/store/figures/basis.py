"""What several figures are computed from, written once: finished runs by when they
ended (the index range every windowed figure reads), a run's lateness at its first
attempt, and how many occurrences an event stands for.

Rules this module guards:

- A finished run's instant is ``COALESCE(finished_at, updated_at)`` and its states are
  the literal condition of the partial index ``job_runs_tenant_finished`` (migration
  0018; the time-only ``job_runs_finished`` went in 0024): a query spells both exactly as
  :data:`FINISHED_STATES_SQL` and :data:`ENDED_SQL` do, or SQLite may not use the index.
- The dispatch lateness of a run finished (succeeded or failed) at its first attempt is
  that attempt's start minus the run's ``due_at`` (still the planned one: nothing moved
  it); runs that were retried are left out. The operator's percentiles and the
  ``/metrics`` histogram count the same runs (:data:`LATENESS_SQL`).
- A summary event (``schedule.run.missed`` of a catch-up, ``clock.jump_detected``)
  carries ``count``: it stands for that many occurrences; any other event for one.
"""

from __future__ import annotations

import json
from typing import Any, Final

from appliance.store.infra.connection import Sql

DAY_MS: Final = 86_400_000
FINISHED_STATES_SQL: Final = "state IN ('cancelled', 'failed', 'missed', 'succeeded')"
ENDED_SQL: Final = "COALESCE(finished_at, updated_at)"
# Named: with statistics, the planner may otherwise prefer another of job_runs' indexes
# (a time-only one, before migration 0024) and read a table row per run in the range.
# PostgreSQL's planner picks its own index.
BY_TENANT_FINISHED: Final = Sql(sqlite="INDEXED BY job_runs_tenant_finished", postgres="")
# ``r``: the run, ``a``: its first attempt (``attempts a ON a.run_id = r.id AND
# a.attempt = 1``); counted for runs succeeded or failed with ``r.attempt = 1`` only.
FIRST_ATTEMPT_JOIN: Final = "attempts a ON a.run_id = r.id AND a.attempt = 1"
LATENESS_SQL: Final = "a.started_at - r.due_at"


def event_fields(data: object) -> dict[str, Any]:
    """An event's ``data`` column as its fields (none when it has no data)."""
    return json.loads(str(data)) if data else {}


def occurrences(fields: dict[str, Any]) -> int:
    """How many occurrences an event of these fields stands for."""
    return int(fields.get("count", 1))
