"""Tenants and their signing secrets; a new tenant gets its first write key
(:mod:`appliance.store.api_keys`).

Signing-secret rules (ADR 0032):

- Every active secret signs every delivery (one ``v1,`` entry each, newest first), so a
  receiver holding any one of them verifies. At most ``MAX_ACTIVE_SECRETS`` are active.
- A rotation adds a new secret and gives the current one (no expiry yet) an expiry
  ``overlap`` from now: the receiver has that long to switch. A secret already expiring
  (an earlier rotation's) keeps its expiry, so a shorter overlap never cuts the time a
  receiver was promised; an overlap of 0 expires every other secret at once.
- An active secret can be expired at once (a leak), but never the last one: deliveries
  need a secret. Secrets are shown whole when created, and to an owner who reveals one
  (audited: :mod:`appliance.store.secret_reveal`).
- A rotation appends ``signing_secret.rotated``, an expiry ``signing_secret.revoked`` (the
  secret's id and mask, never the secret), naming the actor, in the same transaction. A
  new tenant's first secret comes with the tenant.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from appliance.core.events import Actor, EventType, JsonValue
from appliance.core.ids import new_id
from appliance.core.signing import SECRET_PREFIX, new_signing_secret
from appliance.errors import Conflict, NotFound, ValidationError
from appliance.store.active_secrets import MAX_ACTIVE_SECRETS
from appliance.store.api_keys import Scope, insert_api_key
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection

# How long replaced secrets keep signing after a rotation, unless the rotation says.
DEFAULT_OVERLAP_SECONDS = 86_400
MAX_OVERLAP_SECONDS = 7 * 86_400
# A rotation's replaced secrets expire at the earlier of their own end and ``:until``
# (scalar min: least).


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTenant:
    """A freshly created tenant; ``api_key`` and ``signing_secret`` are shown only once."""

    tenant_id: str
    api_key: str
    signing_secret: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    id: str
    name: str
    created_at: int
    schedules: int  # live (not deleted) schedules


def create_tenant(conn: Connection, *, name: str, now: int) -> NewTenant:
    """A new tenant with a write key and a signing secret; Conflict if the name (ignoring
    case) is taken: names are how an operator tells tenants apart."""
    _refuse_taken(conn, name)
    tenant_id = new_id("ten", now)
    conn.execute(
        "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)", (tenant_id, name, now)
    )
    issued = insert_api_key(
        conn, tenant_id=tenant_id, name="initial key", scope=Scope.WRITE, now=now
    )
    secret = _add_secret(conn, tenant_id=tenant_id, now=now)
    return NewTenant(tenant_id=tenant_id, api_key=issued.api_key, signing_secret=secret.secret)


def rename_tenant(conn: Connection, *, tenant_id: str, name: str) -> None:
    """Give a tenant another unique name (NotFound, Conflict). Works on a database from
    before names were unique too: it is how duplicates are resolved."""
    if not tenant_exists(conn, tenant_id=tenant_id):
        raise NotFound(f"no tenant {tenant_id}")
    _refuse_taken(conn, name, besides=tenant_id)
    conn.execute("UPDATE tenants SET name = ? WHERE id = ?", (name, tenant_id))


def list_tenants(conn: Connection) -> list[Tenant]:
    """Every tenant, oldest first, with its count of live schedules."""
    rows = conn.execute(
        "SELECT t.id, t.name, t.created_at, (SELECT count(*) FROM schedules s"
        " WHERE s.tenant_id = t.id AND s.deleted_at IS NULL) FROM tenants t ORDER BY t.id"
    )
    return [
        Tenant(id=str(i), name=str(n), created_at=int(c), schedules=int(k)) for i, n, c, k in rows
    ]


def _refuse_taken(conn: Connection, name: str, *, besides: str = "") -> None:
    row = conn.execute(
        "SELECT id FROM tenants WHERE lower(name) = lower(?) AND id != ?", (name, besides)
    ).fetchone()
    if row is not None:
        raise Conflict(f"a tenant named {name!r} exists already ({row[0]}): choose another name")


@dataclass(frozen=True, slots=True, kw_only=True)
class SigningSecret:
    id: str
    secret: str  # whole: shown only by the rotation that made it, or an audited reveal
    created_at: int
    expires_at: int | None

    @property
    def masked(self) -> str:
        return f"{SECRET_PREFIX}…{self.secret.rstrip('=')[-4:]}"


class TooManySecrets(Conflict):
    """A rotation would leave more than MAX_ACTIVE_SECRETS active."""


class LastSecret(Conflict):
    """Expiring this secret would leave the tenant's deliveries unsigned."""


def list_signing_secrets(conn: Connection, *, tenant_id: str, now: int) -> list[SigningSecret]:
    """The tenant's active secrets, newest first."""
    return _active(conn, tenant_id, now)


def rotate_signing_secret(
    conn: Connection, *, tenant_id: str, overlap_ms: int, now: int, actor: Actor
) -> SigningSecret:
    """A new current secret; the current one expires ``overlap_ms`` from now, those
    already expiring keep their expiry (0: every other one expires at once)."""
    active = _active(conn, tenant_id, now)
    if overlap_ms > 0 and len(active) >= MAX_ACTIVE_SECRETS:
        raise TooManySecrets(
            f"{len(active)} secrets are active (at most {MAX_ACTIVE_SECRETS}): expire one"
            " first, or rotate with overlap_seconds 0"
        )
    expiring = (
        "expires_at IS NULL" if overlap_ms > 0 else "(expires_at IS NULL OR expires_at > :now)"
    )
    conn.execute(
        "UPDATE signing_secrets SET expires_at = :until"
        f" WHERE tenant_id = :tenant AND revoked_at IS NULL AND {expiring}",
        {"until": now + overlap_ms, "tenant": tenant_id, "now": now},
    )
    secret = _add_secret(conn, tenant_id=tenant_id, now=now)
    data: dict[str, JsonValue] = {
        "secret_id": secret.id,
        "masked": secret.masked,
        "overlap_seconds": overlap_ms // 1000,
    }
    append_event(
        conn, tenant_id=tenant_id, type=EventType.SECRET_ROTATED, now=now, data=data, actor=actor
    )
    return secret


def expire_signing_secret(
    conn: Connection, *, tenant_id: str, secret_id: str, now: int, actor: Actor
) -> SigningSecret:
    """Stop signing with one active secret now; NotFound or :class:`LastSecret`."""
    active = _active(conn, tenant_id, now)
    found = [s for s in active if s.id == secret_id]
    if not found:
        raise NotFound(f"no active signing secret {secret_id}")
    if len(active) == 1:
        raise LastSecret(
            f"{secret_id} is the only active secret: rotate first (overlap_seconds 0"
            " replaces it at once)"
        )
    conn.execute("UPDATE signing_secrets SET expires_at = ? WHERE id = ?", (now, secret_id))
    data = {"secret_id": secret_id, "masked": found[0].masked}
    append_event(
        conn, tenant_id=tenant_id, type=EventType.SECRET_REVOKED, now=now, data=data, actor=actor
    )
    return dataclasses.replace(found[0], expires_at=now)


def _add_secret(conn: Connection, *, tenant_id: str, now: int) -> SigningSecret:
    secret = SigningSecret(
        id=new_id("sec", now), secret=new_signing_secret(), created_at=now, expires_at=None
    )
    conn.execute(
        "INSERT INTO signing_secrets (id, tenant_id, secret, created_at) VALUES (?, ?, ?, ?)",
        (secret.id, tenant_id, secret.secret, now),
    )
    return secret


def _active(conn: Connection, tenant_id: str, now: int) -> list[SigningSecret]:
    rows = conn.execute(
        "SELECT id, secret, created_at, expires_at FROM signing_secrets"
        " WHERE tenant_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)"
        " ORDER BY created_at DESC, rowid DESC LIMIT ?",
        (tenant_id, now, MAX_ACTIVE_SECRETS + 1),
    )
    return [
        SigningSecret(
            id=str(sid),
            secret=str(secret),
            created_at=int(created_at),
            expires_at=None if expires_at is None else int(expires_at),
        )
        for sid, secret, created_at, expires_at in rows
    ]


def tenant_exists(conn: Connection, *, tenant_id: str) -> bool:
    return conn.execute("SELECT 1 FROM tenants WHERE id = ?", (tenant_id,)).fetchone() is not None


def parse_overlap(obj: object) -> int:
    """``overlap_seconds`` of a rotate body (``{}`` or ``null`` → the default)."""
    if not isinstance(obj, dict):
        raise ValidationError.single("body", 'must be a JSON object, e.g. {"overlap_seconds": 0}')
    unknown = sorted(set(obj) - {"overlap_seconds"})
    if unknown:
        raise ValidationError.single(str(unknown[0]), "is not a field of a rotation; drop it")
    value = obj.get("overlap_seconds")
    if value is None:
        return DEFAULT_OVERLAP_SECONDS
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema's integer: 60.0 is 60
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 0 <= value <= MAX_OVERLAP_SECONDS
    ):
        raise ValidationError.single(
            "overlap_seconds", f"must be a whole number of seconds from 0 to {MAX_OVERLAP_SECONDS}"
        )
    return value


def check_tenant_name(name: str) -> str:
    """A tenant name as stored (trimmed, 1-200 characters); ValidationError otherwise."""
    name = name.strip()
    if not name or len(name) > 200:
        raise ValidationError.single("name", "a tenant name is 1-200 characters")
    return name
