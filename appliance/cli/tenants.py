"""Operator commands that act on the database directly — they work while the appliance
runs (SQLite serialises the writes): tenants, and the API keys and signing secrets of any
tenant.

Each opens the database, does one transaction and closes it. Tenants use the same store
functions through the API (``/v1/keys``, ``/v1/signing-secrets``); the key and secret
events these commands record name the actor ``operator:cli``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from appliance.clock import SystemClock
from appliance.core.events import Actor
from appliance.errors import NotFound
from appliance.settings.model import Settings
from appliance.store.api_keys import ApiKey, IssuedKey, Scope, issue_api_key, list_api_keys
from appliance.store.api_keys import revoke_api_key as store_revoke_api_key
from appliance.store.infra.connection import Connection
from appliance.store.suspension import resume_tenant, suspend_tenant
from appliance.store.tenants import (
    NewTenant,
    SigningSecret,
    Tenant,
    check_tenant_name,
    list_tenants,
    rename_tenant,
    rotate_signing_secret,
    tenant_exists,
)
from appliance.store.tenants import create_tenant as store_create_tenant
from appliance.store.users import find_tenant_id
from appliance.wiring.storage import open_configured_store

P = ParamSpec("P")
T = TypeVar("T")

OPERATOR = Actor.operator()  # the actor of every change these commands make


def _write(
    settings: Settings, fn: Callable[Concatenate[Connection, P], T], *a: P.args, **kw: P.kwargs
) -> T:
    db = open_configured_store(settings)
    try:
        return db.write_now(fn, *a, **kw)
    finally:
        db.close()


def _known_tenant(conn: Connection, tenant_id: str) -> None:
    if not tenant_exists(conn, tenant_id=tenant_id):
        raise NotFound(f"no tenant {tenant_id}")


def create_tenant(settings: Settings, *, name: str) -> NewTenant:
    return _write(settings, store_create_tenant, name=check_tenant_name(name), now=_now())


def list_all_tenants(settings: Settings) -> list[Tenant]:
    return _write(settings, list_tenants)


def rename(settings: Settings, *, tenant_id: str, name: str) -> None:
    """Rename a tenant, also in a database not yet migrated: this is how the duplicate
    names that stop the unique-names migration are resolved."""
    db = open_configured_store(settings, migrate_schema=False)
    try:
        db.write_now(rename_tenant, tenant_id=tenant_id, name=check_tenant_name(name))
    finally:
        db.close()


def suspend(settings: Settings, *, id_or_name: str) -> tuple[str, int | None]:
    """Suspend a tenant by id or name: its id and the open runs cancelled (None: it was
    already suspended). A running appliance sees it at its next query."""

    def write(conn: Connection) -> tuple[str, int | None]:
        tenant_id = find_tenant_id(conn, id_or_name=id_or_name)
        return tenant_id, suspend_tenant(conn, tenant_id=tenant_id, now=_now(), actor=OPERATOR)

    return _write(settings, write)


def resume(settings: Settings, *, id_or_name: str) -> tuple[str, bool]:
    """Resume a tenant by id or name: its id and whether it was suspended. A running
    appliance's planner catches its schedules up within its longest sleep (a minute)."""

    def write(conn: Connection) -> tuple[str, bool]:
        tenant_id = find_tenant_id(conn, id_or_name=id_or_name)
        return tenant_id, resume_tenant(conn, tenant_id=tenant_id, now=_now(), actor=OPERATOR)

    return _write(settings, write)


def create_key(settings: Settings, *, tenant_id: str, name: str, scope: Scope) -> IssuedKey:
    def issue(conn: Connection) -> IssuedKey:
        _known_tenant(conn, tenant_id)
        return issue_api_key(
            conn, tenant_id=tenant_id, name=name, scope=scope, now=_now(), actor=OPERATOR
        )

    return _write(settings, issue)


def list_keys(settings: Settings, *, tenant_id: str) -> list[ApiKey]:
    def read(conn: Connection) -> list[ApiKey]:
        _known_tenant(conn, tenant_id)
        return list_api_keys(conn, tenant_id=tenant_id)

    return _write(settings, read)


def revoke_key(settings: Settings, *, key_id: str) -> ApiKey:
    return _write(
        settings, store_revoke_api_key, tenant_id=None, key_id=key_id, now=_now(), actor=OPERATOR
    )


def rotate_secret(settings: Settings, *, tenant_id: str, overlap_seconds: int) -> SigningSecret:
    def rotate(conn: Connection) -> SigningSecret:
        _known_tenant(conn, tenant_id)
        return rotate_signing_secret(
            conn,
            tenant_id=tenant_id,
            overlap_ms=overlap_seconds * 1000,
            now=_now(),
            actor=OPERATOR,
        )

    return _write(settings, rotate)


def _now() -> int:
    return SystemClock().now_ms()
