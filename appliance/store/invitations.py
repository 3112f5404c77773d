"""Inviting a person to a tenant, and the setup link that makes their account (docs/ui.md,
"People and sign-in"). The one home of an invitation: the owners' users page, the
operators' tenants page and ``steeple user create`` all call :func:`invite_user`.

Rules this module guards:

- Inviting answers alike whether or not the email has an account in another tenant:
  it writes one invitation row (a single-use token, stored as its SHA-256, valid for an
  hour) and looks at no other tenant. Only an email that is already a user of *this*
  tenant is refused (Conflict): the owner sees those on the users page anyway.
- The account is made when the link is used: :func:`finish_setup` creates the user with
  the invitation's tenant and role and marks the invitation used, in one transaction. If
  the email has an account by then (in any tenant), the link fails closed with the
  message of an unknown link, and nothing of that account changes.
- The setup page reads the same for an invitation as for the link of an account made
  without a password (:func:`appliance.store.users.issue_setup_token`): :func:`setup_email`.
- An invitation appends ``user.invited`` naming who invited, a tenant account made here
  ``user.created`` (the new user is its actor when they used a link), in the same
  transaction; never a token or a password.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Final

from appliance.core.events import Actor, EventType
from appliance.core.ids import new_id
from appliance.errors import Conflict, NotFound
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.infra.rows import Columns, integer, text
from appliance.store.users import (
    SETUP_LINK_MS,
    Role,
    User,
    complete_setup,
    create_user,
    find_tenant_id,
    list_users,
    normalise_email,
    setup_user,
    user_by_email,
)

DEAD_LINK: Final = "this setup link is unknown, used or expired: ask for a new one"


@dataclass(frozen=True, slots=True, kw_only=True)
class Invitation:
    id: str
    tenant_id: str
    email: str
    role: Role
    created_at: int
    expires_at: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Invited:
    """A new invitation and its token (shown once, in the setup link)."""

    invitation: Invitation
    token: str


_INVITATION = Columns(
    Invitation,
    ("id", "tenant_id", "email", "role", "created_at", "expires_at"),
    table="invitations",
    convert={
        "id": text,
        "tenant_id": text,
        "email": text,
        "role": lambda v: Role(text(v)),
        "created_at": integer,
        "expires_at": integer,
    },
)


def invite_user(
    conn: Connection, *, tenant: str, email: str, role: Role, now: int, actor: Actor
) -> Invited:
    """A new invitation of ``email`` to ``tenant`` (its id, or its unique name as an
    operator types it: NotFound, Conflict); Conflict when the email is a user of this
    tenant already, ValidationError (``email``) when it is no address."""
    tenant_id = find_tenant_id(conn, id_or_name=tenant)
    address = normalise_email(email)
    member = user_by_email(conn, email=address)
    if member is not None and member.tenant_id == tenant_id:
        raise Conflict(f"{address} is a user of this tenant already")
    token = secrets.token_urlsafe(32)
    invitation = Invitation(
        id=new_id("inv", now),
        tenant_id=tenant_id,
        email=address,
        role=role,
        created_at=now,
        expires_at=now + SETUP_LINK_MS,
    )
    conn.execute(
        "INSERT INTO invitations (token_hash, id, tenant_id, email, role, created_at,"
        " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (_digest(token), invitation.id, tenant_id, address, str(role), now, invitation.expires_at),
    )
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.USER_INVITED,
        now=now,
        data={"invitation_id": invitation.id, "email": address, "role": str(role)},
        actor=actor,
    )
    return Invited(invitation=invitation, token=token)


def pending_invitations(conn: Connection, *, tenant_id: str, now: int) -> list[Invitation]:
    """The tenant's invitations not used and not expired, by email."""
    rows = conn.execute(
        f"SELECT {_INVITATION.select} FROM invitations WHERE tenant_id = ?"
        " AND used_at IS NULL AND expires_at > ? ORDER BY email, id",
        (tenant_id, now),
    )
    return _INVITATION.all(rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class People:
    """A tenant's users and the invitations still pending, as of one snapshot."""

    users: list[User]  # by email
    invited: list[Invitation]  # not used, not expired; by email


def tenant_people(conn: Connection, *, tenant_id: str, now: int) -> People:
    """The tenant's users and pending invitations read together: an invitation used
    meanwhile shows once, as the user it made or as still pending, never as both."""
    return People(
        users=list_users(conn, tenant_id=tenant_id),
        invited=pending_invitations(conn, tenant_id=tenant_id, now=now),
    )


def setup_email(conn: Connection, *, token: str, now: int) -> str | None:
    """The email a live setup link is for (an invitation's, or an account's), or None."""
    user = setup_user(conn, token=token, now=now)
    if user is not None:
        return user.email
    invitation = _live(conn, token, now)
    return None if invitation is None else invitation.email


def finish_setup(conn: Connection, *, token: str, password_hash: str, now: int) -> User:
    """Use a live setup link: set the password of its account, or create the invited
    user with it. NotFound (:data:`DEAD_LINK`) when the link is unknown, used or expired,
    or when an invitation's email has an account already."""
    if setup_user(conn, token=token, now=now) is not None:
        return complete_setup(conn, token=token, password_hash=password_hash, now=now)
    invitation = _live(conn, token, now)
    if invitation is None or user_by_email(conn, email=invitation.email) is not None:
        raise NotFound(DEAD_LINK)
    conn.execute(
        "UPDATE invitations SET used_at = ? WHERE token_hash = ? AND used_at IS NULL",
        (now, _digest(token)),
    )
    if conn.changes() != 1:
        raise NotFound(DEAD_LINK)
    return _create(
        conn, invitation.tenant_id, invitation.email, invitation.role, password_hash, now
    )


def add_user_with_password(
    conn: Connection, *, tenant: str, email: str, role: Role, password_hash: str, now: int
) -> User:
    """A tenant user made at once with a password (``steeple user create
    --password-file``); Conflict when the email has an account. The operator is the actor."""
    tenant_id = find_tenant_id(conn, id_or_name=tenant)
    return _create(conn, tenant_id, email, role, password_hash, now, actor=Actor.operator())


def _create(
    conn: Connection,
    tenant_id: str,
    email: str,
    role: Role,
    password_hash: str,
    now: int,
    *,
    actor: Actor | None = None,
) -> User:
    """The account and its ``user.created``; ``actor`` None: the new user themselves."""
    user = create_user(
        conn,
        email=email,
        tenant_id=tenant_id,
        role=role,
        operator=False,
        password_hash=password_hash,
        now=now,
    )
    append_event(
        conn,
        tenant_id=tenant_id,
        type=EventType.USER_CREATED,
        now=now,
        data={"user_id": user.id, "email": user.email, "role": str(user.role)},
        actor=actor or Actor.user(user.id),
    )
    return user


def _live(conn: Connection, token: str, now: int) -> Invitation | None:
    row = conn.execute(
        f"SELECT {_INVITATION.select} FROM invitations WHERE token_hash = ?"
        " AND used_at IS NULL AND expires_at > ?",
        (_digest(token), now),
    ).fetchone()
    return None if row is None else _INVITATION.one(row)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
