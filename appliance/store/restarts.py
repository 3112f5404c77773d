"""The downtime report of a restart, in the database (core/downtime.py says what it means).

- :func:`tally_downtime`: the occurrences scheduled while the appliance was down, per the
  catch-up policy of their schedule — *late*: delivered (or queued for delivery) after the
  restart, no attempt before it; *missed*: recorded ``missed`` by the restart's planning.
  Runs the previous process had in flight are the boot reclaim's (counted there, not here).
  One range scan per tenant and counted state over ``job_runs_tenant_state_time``
  (forced: without statistics SQLite would scan the table), in a read: the cost is the
  downtime's occurrences, not the history's, and the writer never waits for it.
- :func:`downtime_report`: the report from the previous incarnation and the tally.
- :func:`record_restart`: the ``appliance.restarted`` event (``system`` tenant: every
  tenant's feed shows it).
- :func:`last_restart`: the latest report, for ``steeple status``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from appliance.core.downtime import DowntimeReport
from appliance.core.events import EventType
from appliance.core.runs import RunState
from appliance.core.schedules import CatchupPolicy
from appliance.store.events import SYSTEM_TENANT, append_event
from appliance.store.incarnations import PreviousIncarnation
from appliance.store.infra.connection import Connection, Sql
from appliance.store.runs import state_list

# Every state but ``cancelled``: a cancelled occurrence is neither late nor missed.
_COUNTED = tuple(state for state in RunState if state is not RunState.CANCELLED)


def _tally(runs: str) -> str:
    return f"""
SELECT s.catchup_policy, r.state = 'missed', count(*)
FROM tenants t
CROSS JOIN {runs}
JOIN schedules s ON s.id = r.schedule_id
WHERE r.tenant_id = t.id AND r.state IN {state_list(_COUNTED)}
AND r.scheduled_for >= :since AND r.scheduled_for < :until
AND r.trigger = 'schedule' AND CASE
    WHEN r.state = 'missed' THEN r.created_at >= :until
    ELSE NOT EXISTS (
        SELECT 1 FROM attempts a WHERE a.run_id = r.id AND a.started_at < :until)
END
GROUP BY 1, 2
"""


# SQLite is told the (tenant, state, time) index; PostgreSQL's planner picks its own.
_TALLY: Final = Sql(
    sqlite=_tally("job_runs r INDEXED BY job_runs_tenant_state_time"), postgres=_tally("job_runs r")
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tally:
    late: dict[CatchupPolicy, int]
    missed: dict[CatchupPolicy, int]


def tally_downtime(conn: Connection, *, since: int, until: int) -> Tally:
    """What became of the occurrences scheduled in ``[since, until)``."""
    late: Counter[CatchupPolicy] = Counter()
    missed: Counter[CatchupPolicy] = Counter()
    for policy, is_missed, count in conn.execute(_TALLY.on(conn), {"since": since, "until": until}):
        (missed if is_missed else late)[CatchupPolicy(policy)] += int(count)
    return Tally(late=dict(late), missed=dict(missed))


def downtime_report(
    conn: Connection,
    *,
    previous: PreviousIncarnation,
    restarted_at: int,
    reclaimed: int,
    restored_at: int | None = None,
) -> DowntimeReport:
    """The report of the downtime before ``restarted_at`` (a read). Call it once the
    restart's planning has caught up: every occurrence scheduled before the start has its
    row."""
    down_since = min(previous.stopped_at, restarted_at)  # a clock stepped back: no downtime
    tally = tally_downtime(conn, since=down_since, until=restarted_at)
    return DowntimeReport(
        previous_incarnation=previous.id,
        down_since=down_since,
        restarted_at=restarted_at,
        clean_shutdown=previous.ended_at is not None,
        restored_at=restored_at,
        reclaimed=reclaimed,
        late=tally.late,
        missed=tally.missed,
    )


def record_restart(conn: Connection, *, report: DowntimeReport, now: int) -> int:
    """Record ``appliance.restarted``; returns its sequence number."""
    return append_event(
        conn,
        tenant_id=SYSTEM_TENANT,
        type=EventType.APPLIANCE_RESTARTED,
        now=now,
        data=report.event_data(),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LastRestart:
    at: int  # when the report was recorded
    data: dict[str, Any]  # the event's data (contracts/events/appliance.restarted.json)


def last_restart(conn: Connection) -> LastRestart | None:
    """The latest downtime report (``events_tenant_type``: one index probe)."""
    row = conn.execute(
        "SELECT occurred_at, data FROM events WHERE tenant_id = ? AND type = ?"
        " ORDER BY seq DESC LIMIT 1",
        (SYSTEM_TENANT, str(EventType.APPLIANCE_RESTARTED)),
    ).fetchone()
    if row is None:
        return None
    return LastRestart(at=int(row[0]), data=json.loads(str(row[1])))
