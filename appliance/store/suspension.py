"""Suspending and resuming a tenant (docs/operations.md, "Suspending a tenant").

Rules this module guards:

- While a tenant is suspended (``tenants.suspended_at`` set) its API keys answer 403, its
  users cannot sign in and their sessions stop working (:mod:`appliance.store.sessions`),
  and its schedules plan nothing: the planner's queries skip them
  (:data:`appliance.store.planning.PLAN_SQL`), so their cursors stay where they were.
- Suspending cancels the tenant's open runs (pending or waiting for a retry, planned
  ahead or due); runs in flight finish their attempt and get no retry
  (:func:`appliance.store.runs.cancel_if_withdrawn`).
- Resuming only clears the mark: the planner finds the cursors in the past and treats the
  occurrences of the suspension as misfires under each schedule's catch-up policy (``all``
  within the window, ``latest``, ``skip``; the rest recorded ``missed``) — exactly as
  after the appliance was down for that long.
- Suspending a suspended tenant, or resuming an active one, changes nothing.
- Each suspension and resumption appends ``tenant.suspended`` / ``tenant.resumed`` to
  the tenant's own feed in the same transaction, naming the operator as actor: the web
  UI's operator, or ``operator:cli`` from the command line (None only in events written
  before the command line named itself, and by tests that act as the store alone).
"""

from __future__ import annotations

from appliance.core.events import Actor, EventType
from appliance.core.instants import format_instant
from appliance.core.runs import RunState, Transition, check_transition
from appliance.errors import NotFound
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.runs import OPEN_SQL

# The tenants whose schedules plan nothing and whose callers are refused.
SUSPENDED_TENANTS_SQL = "SELECT id FROM tenants WHERE suspended_at IS NOT NULL"


def suspend_tenant(
    conn: Connection, *, tenant_id: str, now: int, actor: Actor | None = None
) -> int | None:
    """Suspend ``tenant_id``; answers how many open runs were cancelled, or None when it
    was already suspended. NotFound for an unknown tenant."""
    if suspended_since(conn, tenant_id=tenant_id) is not None:
        return None
    conn.execute("UPDATE tenants SET suspended_at = ? WHERE id = ?", (now, tenant_id))
    cancelled = check_transition(RunState.PENDING, Transition.CANCEL)
    conn.execute(
        "UPDATE job_runs SET state = ?, finished_at = ?, updated_at = ?"
        f" WHERE tenant_id = ? AND state IN {OPEN_SQL}",
        (cancelled.value, now, now, tenant_id),
    )
    count = conn.changes()
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.TENANT_SUSPENDED,
        now=now,
        data={"cancelled_runs": count},
        actor=actor,
    )
    return count


def resume_tenant(
    conn: Connection, *, tenant_id: str, now: int, actor: Actor | None = None
) -> bool:
    """Resume ``tenant_id``; False when it was not suspended. NotFound for an unknown one."""
    since = suspended_since(conn, tenant_id=tenant_id)
    if since is None:
        return False
    conn.execute("UPDATE tenants SET suspended_at = NULL WHERE id = ?", (tenant_id,))
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.TENANT_RESUMED,
        now=now,
        data={"suspended_at": format_instant(since)},
        actor=actor,
    )
    return True


def suspended_since(conn: Connection, *, tenant_id: str) -> int | None:
    """When ``tenant_id`` was suspended, or None when it is active; NotFound if unknown."""
    row = conn.execute("SELECT suspended_at FROM tenants WHERE id = ?", (tenant_id,)).fetchone()
    if row is None:
        raise NotFound(f"no tenant {tenant_id}")
    return None if row[0] is None else int(row[0])


def is_suspended(conn: Connection, *, tenant_id: str | None) -> bool:
    """True when ``tenant_id`` names a suspended tenant (None, unknown: False)."""
    if tenant_id is None:
        return False
    row = conn.execute("SELECT suspended_at FROM tenants WHERE id = ?", (tenant_id,)).fetchone()
    return row is not None and row[0] is not None
