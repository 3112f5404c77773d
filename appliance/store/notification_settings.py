"""Changing a tenant's failure-notification URL, audited (docs/receiver.md, "Failure
notifications"; docs/ui.md, "Notifications").

Rules this module guards:

- Setting, replacing or removing the URL appends ``notifications.updated`` naming who
  asked, in the same transaction as the change: no change without its audit row.
- The event carries the URL's origin only (``scheme://host:port``), never its path or
  query: a notification URL often is a credential (a chat webhook's token is its path).
- Saving the URL already set, or removing none, changes nothing and records nothing.

The URL itself lives in :mod:`appliance.store.notifications`; this sits beside it because
``store.events`` reaches ``store.notifications`` (the outbox), so ``notifications``
cannot append events itself.
"""

from __future__ import annotations

import enum

from appliance.core.breaker import origin_of
from appliance.core.events import Actor, EventType
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.notifications import delete_target, get_target, set_target


class TargetChange(enum.StrEnum):
    SET = "set"  # there was none
    REPLACED = "replaced"  # another URL was set
    REMOVED = "removed"


def save_target(
    conn: Connection, *, tenant_id: str, url: str, now: int, actor: Actor
) -> TargetChange | None:
    """Set ``url`` (already checked by the caller), recorded; None when it was set already."""
    before = get_target(conn, tenant_id=tenant_id)
    if before == url:
        return None
    set_target(conn, tenant_id=tenant_id, url=url, now=now)
    change = TargetChange.SET if before is None else TargetChange.REPLACED
    _record(conn, tenant_id, change, origin_of(url), now=now, actor=actor)
    return change


def remove_target(conn: Connection, *, tenant_id: str, now: int, actor: Actor) -> bool:
    """Remove the URL, recorded; False (nothing recorded) when none was set."""
    before = get_target(conn, tenant_id=tenant_id)
    if before is None or not delete_target(conn, tenant_id=tenant_id):
        return False
    _record(conn, tenant_id, TargetChange.REMOVED, origin_of(before), now=now, actor=actor)
    return True


def _record(
    conn: Connection, tenant_id: str, change: TargetChange, origin: str, *, now: int, actor: Actor
) -> None:
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.NOTIFICATIONS_UPDATED,
        now=now,
        data={"change": str(change), "origin": origin},
        actor=actor,
    )
