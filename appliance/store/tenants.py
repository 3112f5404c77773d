"""Tenants, their API keys (hashed) and their signing secrets."""

from __future__ import annotations

import json
from collections.abc import Iterable
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


MAX_ACTIVE_SECRETS = 3  # ADR 0032


def active_secrets(conn: apsw.Connection, *, tenant_id: str, now: int) -> list[str]:
    """Secrets that sign deliveries now, newest first (ADR 0032: at most 3)."""
    return list(active_secrets_of(conn, tenant_ids={tenant_id}, now=now).get(tenant_id, ()))


def active_secrets_of(
    conn: apsw.Connection, *, tenant_ids: Iterable[str], now: int
) -> dict[str, tuple[str, ...]]:
    """:func:`active_secrets` of several tenants in one query (a claim's batch)."""
    found: dict[str, list[str]] = {}
    rows = conn.execute(
        "SELECT tenant_id, secret FROM (SELECT tenant_id, secret, ROW_NUMBER() OVER"
        " (PARTITION BY tenant_id ORDER BY created_at DESC, id DESC) AS newest"
        " FROM signing_secrets WHERE tenant_id IN (SELECT value FROM json_each(?))"
        " AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?))"
        " WHERE newest <= ? ORDER BY tenant_id, newest",
        (json.dumps(sorted(tenant_ids)), now, MAX_ACTIVE_SECRETS),
    )
    for tenant_id, secret in rows:
        found.setdefault(str(tenant_id), []).append(str(secret))
    return {tenant_id: tuple(secrets) for tenant_id, secrets in found.items()}
