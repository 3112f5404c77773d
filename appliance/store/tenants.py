"""Tenants, their API keys (hashed) and their signing secrets."""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from appliance.core.ids import new_id
from appliance.core.keys import hash_api_key, new_api_key
from appliance.core.signing import new_signing_secret


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
    api_key = create_api_key(conn, tenant_id=tenant_id, now=now)
    secret = new_signing_secret()
    conn.execute(
        "INSERT INTO signing_secrets (id, tenant_id, secret, created_at) VALUES (?, ?, ?, ?)",
        (new_id("sec", now), tenant_id, secret, now),
    )
    return NewTenant(tenant_id=tenant_id, api_key=api_key, signing_secret=secret)


def create_api_key(conn: apsw.Connection, *, tenant_id: str, now: int) -> str:
    key = new_api_key()
    conn.execute(
        "INSERT INTO api_keys (id, tenant_id, key_hash, created_at) VALUES (?, ?, ?, ?)",
        (new_id("key", now), tenant_id, hash_api_key(key), now),
    )
    return key


def tenant_for_api_key(conn: apsw.Connection, *, api_key: str) -> str | None:
    """The tenant id a presented key belongs to, or None if unknown or revoked."""
    row = conn.execute(
        "SELECT tenant_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
        (hash_api_key(api_key),),
    ).fetchone()
    return str(row[0]) if row else None


def active_secrets(conn: apsw.Connection, *, tenant_id: str, now: int) -> list[str]:
    """Secrets that sign deliveries now, newest first (ADR 0032: at most 3)."""
    rows = conn.execute(
        "SELECT secret FROM signing_secrets WHERE tenant_id = ? AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, id DESC LIMIT 3",
        (tenant_id, now),
    )
    return [str(secret) for (secret,) in rows]
