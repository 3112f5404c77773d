"""Users of the web UI and their single-use setup links (docs/ui.md, "People and sign-in").

Rules this module guards:

- An email is one user (stored lower-cased, unique by index); a user belongs to one
  tenant with a role (owner, editor, viewer), except an operator, who may have none.
- No default password exists: a user is created with an argon2id hash the caller made
  (:mod:`appliance.core.passwords`) or with none, and then only a setup link sets one.
  People are invited to a tenant by :mod:`appliance.store.invitations`, which creates the
  user when the link is used; :func:`create_user` says when an email is taken, so only
  operators' paths call it directly. Roles change, users are removed and reset in
  :mod:`appliance.store.people`.
- A setup link's token is 256 random bits, stored as its SHA-256, valid for an hour and
  used at most once: consuming it and setting the password are one write transaction,
  and every other open link of that user dies with it.
"""

from __future__ import annotations

import enum
import hashlib
import secrets
from dataclasses import dataclass
from typing import Final

from appliance.core.ids import looks_like, new_id
from appliance.errors import Conflict, NotFound, ValidationError
from appliance.store.infra.connection import Connection
from appliance.store.infra.rows import Columns, flag, integer, optional_integer, optional_text, text

SETUP_LINK_MS: Final = 3_600_000
MAX_EMAIL_CHARS: Final = 254


class Role(enum.StrEnum):
    OWNER = "owner"  # everything of the tenant: keys, secrets, users
    EDITOR = "editor"  # schedules and replays
    VIEWER = "viewer"  # reads only

    def may_edit(self) -> bool:
        return self is not Role.VIEWER


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    id: str
    tenant_id: str | None
    email: str
    role: Role
    operator: bool
    password_hash: str | None
    created_at: int
    disabled_at: int | None

    @property
    def shown_role(self) -> str:
        """The role as pages and the CLI show it: an operator's is "operator" (their
        stored tenant role is only what the tenant pages check)."""
        return "operator" if self.operator else str(self.role)


_USER = Columns(
    User,
    (
        "id",
        "tenant_id",
        "email",
        "role",
        "operator",
        "password_hash",
        "created_at",
        "disabled_at",
    ),
    table="users",
    convert={
        "id": text,
        "tenant_id": optional_text,
        "email": text,
        "role": lambda v: Role(text(v)),
        "operator": flag,
        "password_hash": optional_text,
        "created_at": integer,
        "disabled_at": optional_integer,
    },
)


def normalise_email(email: str) -> str:
    """The stored form of an address; raises ValidationError (field ``email``)."""
    address = email.strip().lower()
    local, at, domain = address.partition("@")
    if not at or not local or "." not in domain or len(address) > MAX_EMAIL_CHARS:
        raise ValidationError.single("email", "must be an address like ada@example.com")
    if any(c.isspace() or not c.isprintable() for c in address):
        raise ValidationError.single("email", "must not hold spaces or control characters")
    return address


def find_tenant_id(conn: Connection, *, id_or_name: str) -> str:
    """The id of the tenant with this id, or else with this (unique) name; NotFound, or
    Conflict when several tenants share the name."""
    if looks_like("ten", id_or_name):
        row = conn.execute("SELECT id FROM tenants WHERE id = ?", (id_or_name,)).fetchone()
        if row is not None:
            return str(row[0])
    rows = conn.execute("SELECT id FROM tenants WHERE name = ?", (id_or_name,)).fetchall()
    if not rows:
        raise NotFound(f"no tenant with the id or name {id_or_name!r}")
    if len(rows) > 1:
        raise Conflict(f"{len(rows)} tenants are named {id_or_name!r}: give the tenant's id")
    return str(rows[0][0])


def create_user(
    conn: Connection,
    *,
    email: str,
    tenant_id: str | None,
    role: Role,
    operator: bool,
    password_hash: str | None,
    now: int,
) -> User:
    """A new user; Conflict when the email is taken."""
    address = normalise_email(email)
    if tenant_id is None and not operator:
        raise ValidationError.single("tenant", "a user who is not an operator needs a tenant")
    if user_by_email(conn, email=address) is not None:
        raise Conflict(f"a user with the email {address} exists already")
    user = User(
        id=new_id("usr", now),
        tenant_id=tenant_id,
        email=address,
        role=role,
        operator=operator,
        password_hash=password_hash,
        created_at=now,
        disabled_at=None,
    )
    conn.execute(
        "INSERT INTO users (id, tenant_id, email, role, operator, password_hash, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (user.id, tenant_id, address, str(role), int(operator), password_hash, now),
    )
    return user


def user_by_email(conn: Connection, *, email: str) -> User | None:
    row = conn.execute(
        f"SELECT {_USER.select} FROM users WHERE email = ?", (email.strip().lower(),)
    ).fetchone()
    return None if row is None else _USER.one(row)


def get_user(conn: Connection, *, user_id: str) -> User | None:
    row = conn.execute(f"SELECT {_USER.select} FROM users WHERE id = ?", (user_id,)).fetchone()
    return None if row is None else _USER.one(row)


def every_user(conn: Connection) -> list[User]:
    """Every user, operators included, by email (``steeple user list``)."""
    return _USER.all(conn.execute(f"SELECT {_USER.select} FROM users ORDER BY email"))


def list_users(conn: Connection, *, tenant_id: str) -> list[User]:
    """A tenant's users by email."""
    rows = conn.execute(
        f"SELECT {_USER.select} FROM users WHERE tenant_id = ? ORDER BY email", (tenant_id,)
    )
    return _USER.all(rows)


def issue_setup_token(conn: Connection, *, user_id: str, now: int) -> str:
    """A new single-use setup token for ``user_id``, valid for an hour (shown once)."""
    if get_user(conn, user_id=user_id) is None:
        raise NotFound(f"no user {user_id}")
    token = secrets.token_urlsafe(32)
    conn.execute(
        "INSERT INTO user_setup_tokens (token_hash, user_id, expires_at) VALUES (?, ?, ?)",
        (_digest(token), user_id, now + SETUP_LINK_MS),
    )
    return token


def setup_user(conn: Connection, *, token: str, now: int) -> User | None:
    """The user a live, unused setup token belongs to, or None."""
    row = conn.execute(
        "SELECT user_id FROM user_setup_tokens WHERE token_hash = ? AND used_at IS NULL"
        " AND expires_at > ?",
        (_digest(token), now),
    ).fetchone()
    return None if row is None else get_user(conn, user_id=str(row[0]))


def complete_setup(conn: Connection, *, token: str, password_hash: str, now: int) -> User:
    """Use the token once: set the password, kill the user's other links and sessions.
    NotFound when the token is unknown, used or expired."""
    user = setup_user(conn, token=token, now=now)
    if user is None:
        raise NotFound("this setup link is unknown, used or expired: ask for a new one")
    conn.execute(
        "UPDATE user_setup_tokens SET used_at = ? WHERE user_id = ? AND used_at IS NULL",
        (now, user.id),
    )
    conn.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user.id))
    conn.execute(
        "UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
        (now, user.id),
    )
    return get_user(conn, user_id=user.id) or user


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
