"""Tenant API keys: issue, list, look up, revoke.

Rules this module guards:

- A key is shown once, when it is issued; only its SHA-256 (:func:`core.keys.hash_api_key`)
  and a short display prefix are stored.
- A revoked key stops working at the next request: every lookup reads ``revoked_at``.
- A tenant always keeps one working ``write`` key: revoking its last one is refused
  (:class:`LastWriteKey`), so a tenant cannot lock itself out of its own API. The check
  and the revocation are one write transaction, so two revocations racing each other
  cannot both pass it.
- ``last_used_at`` is advisory (shown in lists): it is written at most once a minute per
  key, so reads stay reads.
- Issuing and revoking append ``api_key.created`` / ``api_key.revoked`` (id, name, scope;
  never the key) naming the actor, in the same transaction. A new tenant's first key
  comes with the tenant (:func:`insert_api_key`, no event of its own).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass

import apsw

from appliance.core.events import Actor, EventType
from appliance.core.ids import new_id
from appliance.core.keys import display_prefix, hash_api_key, new_api_key
from appliance.errors import Conflict, FieldError, NotFound, ValidationError
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection

# last_used_at is refreshed when older than this; finer is noise and costs writes.
LAST_USED_RESOLUTION_MS = 60_000
MAX_NAME_CHARS = 100
# C0, DEL and C1: what the OpenAPI file's pattern for a key name excludes.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f]")


class Scope(enum.StrEnum):
    READ = "read"  # every GET, and the preview
    WRITE = "write"  # everything a read key may do, and every change


class LastWriteKey(Conflict):
    """Revoking this key would leave the tenant without a key that can write."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """A key as lists show it: never the key itself."""

    id: str
    tenant_id: str
    name: str
    scope: Scope
    prefix: str | None  # None for keys issued before prefixes were kept
    created_at: int
    last_used_at: int | None
    revoked_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class IssuedKey:
    """A key just issued: ``api_key`` is shown this once and never again."""

    key: ApiKey
    api_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """Who a presented key authorises."""

    tenant_id: str
    key_id: str
    scope: Scope
    last_used_at: int | None
    suspended: bool = False  # its tenant is suspended: the API answers 403

    @property
    def actor(self) -> Actor:
        """How the events of this caller's changes name it."""
        return Actor.api_key(self.key_id)


_COLUMNS = "id, tenant_id, name, scope, prefix, created_at, last_used_at, revoked_at"


def issue_api_key(
    conn: Connection, *, tenant_id: str, name: str, scope: Scope, now: int, actor: Actor
) -> IssuedKey:
    """A new key of the tenant, its issue recorded naming ``actor``."""
    issued = insert_api_key(conn, tenant_id=tenant_id, name=name, scope=scope, now=now)
    _record(conn, EventType.API_KEY_CREATED, issued.key, now=now, actor=actor)
    return issued


def insert_api_key(
    conn: Connection, *, tenant_id: str, name: str, scope: Scope, now: int
) -> IssuedKey:
    """A new key without an event: only a new tenant's first key, recorded with it."""
    secret = new_api_key()
    key = ApiKey(
        id=new_id("key", now),
        tenant_id=tenant_id,
        name=name,
        scope=scope,
        prefix=display_prefix(secret),
        created_at=now,
        last_used_at=None,
        revoked_at=None,
    )
    conn.execute(
        "INSERT INTO api_keys (id, tenant_id, key_hash, name, scope, prefix, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (key.id, tenant_id, hash_api_key(secret), name, str(scope), key.prefix, now),
    )
    return IssuedKey(key=key, api_key=secret)


def list_api_keys(
    conn: Connection, *, tenant_id: str, include_revoked: bool = False
) -> list[ApiKey]:
    """A tenant's keys, oldest first."""
    sql = f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = ?"
    if not include_revoked:
        sql += " AND revoked_at IS NULL"
    return [_key(row) for row in conn.execute(sql + " ORDER BY created_at, rowid", (tenant_id,))]


def get_api_key(conn: Connection, *, key_id: str) -> ApiKey | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    return None if row is None else _key(row)


def caller_for_api_key(conn: Connection, *, api_key: str) -> Caller | None:
    """Who ``api_key`` authorises, or None when it is unknown or revoked (a key of a
    suspended tenant is known: the caller refuses it, saying why)."""
    row = conn.execute(
        "SELECT k.tenant_id, k.id, k.scope, k.last_used_at, t.suspended_at FROM api_keys k"
        " LEFT JOIN tenants t ON t.id = k.tenant_id"
        " WHERE k.key_hash = ? AND k.revoked_at IS NULL",
        (hash_api_key(api_key),),
    ).fetchone()
    if row is None:
        return None
    tenant_id, key_id, scope, last_used_at, suspended_at = row
    return Caller(
        tenant_id=str(tenant_id),
        key_id=str(key_id),
        scope=Scope(str(scope)),
        last_used_at=None if last_used_at is None else int(last_used_at),
        suspended=suspended_at is not None,
    )


def needs_last_used(caller: Caller, *, now: int) -> bool:
    """Whether ``caller``'s ``last_used_at`` is stale enough to be written."""
    return caller.last_used_at is None or now - caller.last_used_at >= LAST_USED_RESOLUTION_MS


def touch_api_key(conn: Connection, *, key_id: str, now: int) -> None:
    conn.execute(
        "UPDATE api_keys SET last_used_at = ? WHERE id = ?"
        " AND (last_used_at IS NULL OR last_used_at < ?)",
        (now, key_id, now),
    )


def revoke_api_key(
    conn: Connection, *, tenant_id: str | None, key_id: str, now: int, actor: Actor
) -> ApiKey:
    """Revoke one key at once. ``tenant_id`` None: the operator's CLI, any tenant.
    Raises NotFound (no such live key for this tenant) or :class:`LastWriteKey`."""
    key = get_api_key(conn, key_id=key_id)
    if key is None or key.revoked_at is not None or tenant_id not in (None, key.tenant_id):
        raise NotFound(f"no API key {key_id}")
    if key.scope is Scope.WRITE and _live_write_keys(conn, key.tenant_id) <= 1:
        raise LastWriteKey(
            f"{key_id} is the tenant's last write key: issue another write key first,"
            " then revoke this one"
        )
    conn.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (now, key_id))
    _record(conn, EventType.API_KEY_REVOKED, key, now=now, actor=actor)
    return dataclasses.replace(key, revoked_at=now)


def _record(conn: Connection, type: EventType, key: ApiKey, *, now: int, actor: Actor) -> None:
    data = {"key_id": key.id, "name": key.name, "scope": str(key.scope)}
    append_event(conn, tenant_id=key.tenant_id, type=type, now=now, data=data, actor=actor)


def _live_write_keys(conn: Connection, tenant_id: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM api_keys WHERE tenant_id = ? AND scope = 'write'"
        " AND revoked_at IS NULL",
        (tenant_id,),
    ).fetchone()
    return int(row[0]) if row else 0


def _key(row: tuple[apsw.SQLiteValue, ...]) -> ApiKey:
    key_id, tenant_id, name, scope, prefix, created_at, last_used_at, revoked_at = row
    return ApiKey(
        id=str(key_id),
        tenant_id=str(tenant_id),
        name=str(name),
        scope=Scope(str(scope)),
        prefix=None if prefix is None else str(prefix),
        created_at=int(created_at),  # type: ignore[arg-type]
        last_used_at=None if last_used_at is None else int(last_used_at),
        revoked_at=None if revoked_at is None else int(revoked_at),
    )


def parse_key_request(obj: object) -> tuple[str, Scope]:
    """``name`` (1–100 characters, no control characters) and ``scope``; every problem
    at once."""
    if not isinstance(obj, dict):
        raise ValidationError.single("body", 'must be a JSON object: {"name": …, "scope": …}')
    errors: list[FieldError] = []
    name = obj.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_CHARS:
        errors.append(FieldError(field="name", message=f"must be 1 to {MAX_NAME_CHARS} characters"))
    elif CONTROL_CHARACTERS.search(name):
        errors.append(FieldError(field="name", message="must not hold control characters"))
    scope = obj.get("scope")
    if scope not in tuple(Scope):
        errors.append(FieldError(field="scope", message='must be "read" or "write"'))
    errors.extend(
        FieldError(field=str(extra), message="is not a field of a key; drop it")
        for extra in sorted(set(obj) - {"name", "scope"})
    )
    if errors:
        raise ValidationError(errors)
    return str(name), Scope(str(scope))
