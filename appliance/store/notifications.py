"""Failure notifications in the store: a tenant's notification URL and the outbox of
deliveries to it (docs/receiver.md, "Failure notifications").

Rules this module guards:

- **Nothing lost.** :func:`enqueue_notification` runs inside the transaction that appends
  the event (:func:`appliance.store.events.append_event`): the event and its outbox row
  commit together or not at all. One row per (event, URL) (``UNIQUE``), with the
  envelope body and idempotency key fixed at that moment.
- **Leases.** :func:`claim_notifications` takes due, pending rows whose lease is absent or
  lapsed, in one ``UPDATE … RETURNING``, leasing each until ``now + lease_ms`` and counting
  the attempt. A notifier that dies mid-delivery leaves the lease to lapse; the row is then
  claimed again and delivered again, with the same key (at-least-once).
- **Fenced completion.** :func:`complete_notification` applies the outcome only while the
  row is still pending with the attempt number it was claimed with; a row claimed again
  meanwhile (the lease lapsed) is left to its new holder. Returns whether it applied.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Final

from appliance.core.events import Event
from appliance.core.notifications import NOTIFIED_TYPES, idempotency_key, notification_body
from appliance.store.active_secrets import active_secrets_of
from appliance.store.infra import rows
from appliance.store.infra.connection import ROW_LOCKS, Connection, Sql, read_committed


class NotificationState(enum.StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedNotification:
    """One attempt to make: where, what, with which key and secrets, and its number."""

    id: int
    tenant_id: str
    url: str
    event_type: str
    idempotency_key: str
    body: bytes
    attempt: int
    created_at: int
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationOutcome:
    """How an attempt ended. ``state`` PENDING means retry at ``due_at``."""

    state: NotificationState
    due_at: int | None
    status: int | None
    error: str | None
    failure_reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification:
    """An outbox row as tests and operators read it."""

    id: int
    event_seq: int
    tenant_id: str
    url: str
    idempotency_key: str
    state: NotificationState
    attempts: int
    due_at: int
    last_status: int | None
    failure_reason: str | None


_CLAIMED = rows.Columns(
    ClaimedNotification,
    ["id", "tenant_id", "url", "event_type", "idempotency_key", "body", "attempt", "created_at"],
    sql={"attempt": "attempts"},
    convert={"body": rows.blob},
)
_ROWS = rows.Columns(
    Notification,
    [
        "id",
        "event_seq",
        "tenant_id",
        "url",
        "idempotency_key",
        "state",
        "attempts",
        "due_at",
        "last_status",
        "failure_reason",
    ],
    convert={"state": rows.enum_of(NotificationState)},
)


def set_target(conn: Connection, *, tenant_id: str, url: str, now: int) -> None:
    """Set (or replace) a tenant's notification URL."""
    conn.execute(
        "INSERT INTO notification_targets (tenant_id, url, created_at, updated_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET"
        " url = excluded.url, updated_at = excluded.updated_at",
        (tenant_id, url, now, now),
    )


def get_target(conn: Connection, *, tenant_id: str) -> str | None:
    row = conn.execute(
        "SELECT url FROM notification_targets WHERE tenant_id = ?", (tenant_id,)
    ).fetchone()
    return None if row is None else rows.text(row[0])


def delete_target(conn: Connection, *, tenant_id: str) -> bool:
    """Remove a tenant's notification URL; False when it had none. Rows already in the
    outbox are still delivered: they were promised when their event was written."""
    conn.execute("DELETE FROM notification_targets WHERE tenant_id = ?", (tenant_id,))
    return conn.changes() > 0


def enqueue_notification(conn: Connection, event: Event, *, now: int) -> None:
    """Within the event's own transaction: queue its delivery to the tenant's notification
    URL, if the type is notified and the tenant has one."""
    if event.type not in NOTIFIED_TYPES:
        return
    url = get_target(conn, tenant_id=event.tenant_id)
    if url is None:
        return
    conn.execute(
        "INSERT INTO notifications (event_seq, tenant_id, event_type, url, idempotency_key, body,"
        " state, created_at, due_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)"
        " ON CONFLICT (event_seq, url) DO NOTHING",
        (
            event.seq,
            event.tenant_id,
            str(event.type),
            url,
            idempotency_key(event.id),
            notification_body(event),
            now,
            now,
        ),
    )


# The earliest of each pending row's later of due_at and lease end (scalar max: greatest).
_NEXT_DUE: Final = Sql(
    sqlite="SELECT min(max(due_at, coalesce(leased_until, 0))) FROM notifications"
    " WHERE state = 'pending'",
    postgres="SELECT min(greatest(due_at, coalesce(leased_until, 0))) FROM notifications"
    " WHERE state = 'pending'",
)


def next_notification_due(conn: Connection) -> int | None:
    """When the earliest pending row becomes claimable (epoch ms), or None."""
    row = conn.execute(_NEXT_DUE.on(conn)).fetchone()
    return None if row is None or row[0] is None else rows.integer(row[0])


def _claim_statement(locks: str) -> str:
    return (
        "UPDATE notifications SET leased_until = :until, attempts = attempts + 1"
        " WHERE id IN (SELECT id FROM notifications WHERE state = 'pending'"
        " AND due_at <= :now AND (leased_until IS NULL OR leased_until <= :now)"
        f" ORDER BY due_at, id LIMIT :limit{locks})"
        f" RETURNING {_CLAIMED.select}"
    )


# Per store, by what the pick ends with (:func:`~appliance.store.infra.connection.row_locks`):
# every replica runs a notifier, so on PostgreSQL they pass over each other's rows.
_CLAIM: Final = Sql(
    sqlite=_claim_statement(ROW_LOCKS.sqlite), postgres=_claim_statement(ROW_LOCKS.postgres)
)


@read_committed
def claim_notifications(
    conn: Connection, *, now: int, lease_ms: int, limit: int
) -> list[ClaimedNotification]:
    """Lease up to ``limit`` due rows, oldest due first, each with its tenant's active
    secrets (newest first). ``READ COMMITTED``: the pick locks its rows ``SKIP LOCKED``
    and checks their lease again as it locks them."""
    claimed = _CLAIMED.all(
        conn.execute(_CLAIM.on(conn), {"until": now + lease_ms, "now": now, "limit": limit})
    )
    secrets = active_secrets_of(conn, tenant_ids={c.tenant_id for c in claimed}, now=now)
    return [
        dataclasses.replace(c, secrets=secrets.get(c.tenant_id, ()))
        for c in sorted(claimed, key=lambda c: c.id)
    ]


@read_committed
def complete_notification(
    conn: Connection,
    *,
    notification_id: int,
    attempt: int,
    outcome: NotificationOutcome,
    now: int,
) -> bool:
    """Record attempt ``attempt``'s outcome, fenced (see the module rules).
    ``READ COMMITTED``: one ``UPDATE``, fenced on the attempt in its ``WHERE``."""
    finished = outcome.state is not NotificationState.PENDING
    conn.execute(
        "UPDATE notifications SET state = ?, due_at = coalesce(?, due_at), leased_until = NULL,"
        " last_status = ?, last_error = ?, failure_reason = ?, finished_at = ?"
        " WHERE id = ? AND attempts = ? AND state = 'pending'",
        (
            str(outcome.state),
            outcome.due_at,
            outcome.status,
            outcome.error,
            outcome.failure_reason,
            now if finished else None,
            notification_id,
            attempt,
        ),
    )
    return conn.changes() > 0


def list_notifications(conn: Connection, *, tenant_id: str) -> list[Notification]:
    """A tenant's outbox rows, oldest first."""
    return _ROWS.all(
        conn.execute(
            f"SELECT {_ROWS.select} FROM notifications WHERE tenant_id = ? ORDER BY id",
            (tenant_id,),
        )
    )


def prune_notifications(conn: Connection, *, before: int, limit: int) -> int:
    """Delete up to ``limit`` finished rows (delivered or failed before ``before``, found
    through ``notifications_finished``); pending rows are never deleted. Returns the count."""
    conn.execute(
        "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications"
        " WHERE finished_at IS NOT NULL AND finished_at < ? LIMIT ?)",
        (before, limit),
    )
    return conn.changes()
