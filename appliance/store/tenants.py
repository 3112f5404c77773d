"""Tenants and their signing secrets; a new tenant gets its first write key
(:mod:`appliance.store.api_keys`)."""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from appliance.core.ids import new_id
from appliance.core.signing import new_signing_secret
from appliance.store.api_keys import Scope, issue_api_key


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTenant:
    """A freshly created tenant; ``api_key`` and ``signing_secret`` are shown only once."""

    tenant_id: str
    api_key: str
    signing_secret: str


def create_tenant(conn: apsw.Connection, *, name: str, now: int) -> NewTenant:
    tenant_id = new_id("ten", now)
    conn.execute(
        "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)", (tenant_id, name, now)
    )
    issued = issue_api_key(
        conn, tenant_id=tenant_id, name="initial key", scope=Scope.WRITE, now=now
    )
    secret = new_signing_secret()
    conn.execute(
        "INSERT INTO signing_secrets (id, tenant_id, secret, created_at) VALUES (?, ?, ?, ?)",
        (new_id("sec", now), tenant_id, secret, now),
    )
    return NewTenant(tenant_id=tenant_id, api_key=issued.api_key, signing_secret=secret)


def active_secrets(conn: apsw.Connection, *, tenant_id: str, now: int) -> list[str]:
    """Secrets that sign deliveries now, newest first (ADR 0032: at most 3)."""
    rows = conn.execute(
        "SELECT secret FROM signing_secrets WHERE tenant_id = ? AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, id DESC LIMIT 3",
        (tenant_id, now),
    )
    return [str(secret) for (secret,) in rows]


def tenant_exists(conn: apsw.Connection, *, tenant_id: str) -> bool:
    return conn.execute("SELECT 1 FROM tenants WHERE id = ?", (tenant_id,)).fetchone() is not None
