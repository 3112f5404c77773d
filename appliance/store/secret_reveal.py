"""Revealing a signing secret whole, audited (docs/ui.md, "Signing secrets").

Rules this module guards:

- Only an active secret of the tenant's own is revealed (another tenant's, an expired or
  an unknown id: NotFound, and nothing is recorded).
- Every reveal appends ``signing_secret.revealed`` (the secret's id and mask, never the
  secret) naming who asked, in the same transaction that read the secret: no reveal
  without its audit row.

The secrets themselves live in :mod:`appliance.store.tenants`; this sits beside it
because ``store.events`` reaches ``store.tenants`` (through the notification outbox), so
``tenants`` cannot append events itself.
"""

from __future__ import annotations

from appliance.core.events import Actor, EventType
from appliance.errors import NotFound
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.tenants import SigningSecret, list_signing_secrets


def reveal_signing_secret(
    conn: Connection, *, tenant_id: str, secret_id: str, now: int, actor: Actor
) -> SigningSecret:
    """The active secret ``secret_id`` whole, its reveal recorded; NotFound otherwise."""
    found = [
        s for s in list_signing_secrets(conn, tenant_id=tenant_id, now=now) if s.id == secret_id
    ]
    if not found:
        raise NotFound(f"no active signing secret {secret_id}")
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.SECRET_REVEALED,
        now=now,
        data={"secret_id": secret_id, "masked": found[0].masked},
        actor=actor,
    )
    return found[0]
