"""The store side of the per-origin circuit breaker (:mod:`appliance.core.breaker`): a
claimed run that may not be sent waits, uncharged; the breaker's changes are events.

Rules this module guards:

- **Deferring** undoes the claim, fenced on the lease token like a completion: the run
  goes back to ``retry_wait`` (transition ``defer``) due at the breaker's probe instant,
  its attempt number and ``attempts`` row are taken back (nothing was sent, so nothing is
  charged), and ``failure_reason`` says ``breaker_open`` while it waits (the next
  completion or a replay clears it). No event per run: the breaker's own events say it.
- **Releasing**: when an origin's breaker closes, its runs still waiting (``retry_wait``
  with ``failure_reason`` ``breaker_open``) are due at once; the origin of each is read
  from its schedule's ``target_url`` (:func:`appliance.core.breaker.origin_of`).
- An opened or closed breaker is one ``target.breaker_opened|closed`` event for each
  tenant whose attempts failed in the streak (an origin is shared; each tenant sees it
  in its own feed).
"""

from __future__ import annotations

from collections.abc import Iterable

from appliance.core.breaker import BREAKER_OPEN, origin_of
from appliance.core.events import EventType, JsonValue
from appliance.core.runs import RunState, Transition, check_transition
from appliance.store.claims import ClaimedRun
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.runs import CLAIMABLE_SQL, RUNNING_SQL


def defer_run(conn: Connection, *, run: ClaimedRun, due_at: int, origin: str, now: int) -> bool:
    """Put a claimed run back, not sent, until ``due_at``. False: the lease was lost."""
    target = check_transition(RunState.RUNNING, Transition.DEFER)
    conn.execute(
        "UPDATE job_runs SET state = ?, attempt = attempt - 1, due_at = ?, lease_token = NULL,"
        " lease_expires_at = NULL, heartbeat_at = NULL, failure_reason = ?, last_error = ?,"
        f" updated_at = ? WHERE id = ? AND lease_token = ? AND state = {RUNNING_SQL}",
        (
            target.value,
            due_at,
            BREAKER_OPEN,
            f"not sent: the circuit breaker of {origin} is open",
            now,
            run.run_id,
            run.lease_token,
        ),
    )
    if conn.changes() != 1:
        return False
    conn.execute(
        "DELETE FROM attempts WHERE run_id = ? AND attempt = ? AND lease_token = ?",
        (run.run_id, run.attempt, run.lease_token),
    )
    return True


def release_waiting(conn: Connection, *, origin: str, now: int) -> int:
    """Make the runs waiting for ``origin``'s breaker due ``now``; how many. Read from
    the claimable runs' partial index (its condition spelled as the index says), never a
    walk of every run."""
    waiting = conn.execute(
        "SELECT r.id, s.target_url FROM job_runs r JOIN schedules s ON s.id = r.schedule_id"
        f" WHERE r.state IN {CLAIMABLE_SQL} AND r.state = '{RunState.RETRY_WAIT.value}'"
        " AND r.failure_reason = ?",
        (BREAKER_OPEN,),
    ).fetchall()
    ids = [run_id for run_id, url in waiting if origin_of(str(url)) == origin]
    conn.executemany(
        "UPDATE job_runs SET due_at = ?, updated_at = ? WHERE id = ? AND state = ?"
        " AND failure_reason = ?",
        [(now, now, run_id, RunState.RETRY_WAIT.value, BREAKER_OPEN) for run_id in ids],
    )
    return len(ids)


def announce_breaker(
    conn: Connection,
    *,
    tenant_ids: Iterable[str],
    type: EventType,
    data: dict[str, JsonValue],
    now: int,
) -> None:
    for tenant_id in sorted(tenant_ids):
        append_event(conn, tenant_id=tenant_id, type=type, now=now, data=data)
