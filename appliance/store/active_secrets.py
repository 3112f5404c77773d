"""The secrets that sign a tenant's deliveries now (ADR 0032; the rules of rotation and
expiry are :mod:`appliance.store.tenants`'). Read by the claim, the notifier's outbox and
the curl and dedupe-test views; apart from ``tenants`` so that ``store.events`` (through
the notification outbox) does not reach the module that appends key and secret events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final

from appliance.store.infra.connection import Connection, Sql

# ADR 0032: a tenant has at most this many active secrets at once.
MAX_ACTIVE_SECRETS: Final = 3


def active_secrets(conn: Connection, *, tenant_id: str, now: int) -> list[str]:
    """Secrets that sign deliveries now, newest first."""
    return list(active_secrets_of(conn, tenant_ids={tenant_id}, now=now).get(tenant_id, ()))


# The tenants arrive as one JSON array: one statement whatever their number.
_TENANT_IDS: Final = Sql(
    sqlite="(SELECT value FROM json_each(?))",
    postgres="(SELECT value FROM json_array_elements_text(CAST(? AS json)))",
)


def active_secrets_of(
    conn: Connection, *, tenant_ids: Iterable[str], now: int
) -> dict[str, tuple[str, ...]]:
    """:func:`active_secrets` of several tenants in one query (a claim's batch)."""
    found: dict[str, list[str]] = {}
    rows = conn.execute(
        "SELECT tenant_id, secret FROM (SELECT tenant_id, secret, ROW_NUMBER() OVER"
        " (PARTITION BY tenant_id ORDER BY created_at DESC, rowid DESC) AS newest"
        f" FROM signing_secrets WHERE tenant_id IN {_TENANT_IDS.on(conn)}"
        " AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)) ranked"
        " WHERE newest <= ? ORDER BY tenant_id, newest",
        (json.dumps(sorted(tenant_ids)), now, MAX_ACTIVE_SECRETS),
    )
    for tenant_id, secret in rows:
        found.setdefault(str(tenant_id), []).append(str(secret))
    return {tenant_id: tuple(secrets) for tenant_id, secrets in found.items()}
