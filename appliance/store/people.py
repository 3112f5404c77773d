"""Managing the people of a tenant and one's own account (docs/ui.md, "People and sign-in").
The one home of these changes: the owners' ``/settings/users``, everyone's
``/settings/account`` and ``steeple user list|set-role|remove|reset`` all call it.

Rules this module guards:

- A tenant always keeps an owner: removing or demoting its last owner is refused
  (Conflict, :data:`LAST_OWNER`) and changes nothing.
- Removing a user deletes the account, its setup links and its sessions in one
  transaction: the user is signed out at once, and the email may be invited again.
- A reset (a forgotten password) ends every session and kills every earlier setup link
  of the user, then issues one new single-use link
  (:func:`~appliance.store.users.issue_setup_token`).
- A password change keeps the session that made it and ends the user's others; ending
  one's other sessions keeps the current one.
- Each change appends its event (``user.role_changed``, ``user.removed``, ``user.reset``,
  ``user.password_changed``, ``user.sessions_ended``) naming the actor, in the same
  transaction, in the user's tenant; never a token or a password. An operator without a
  tenant has no feed: their own password and session changes write no event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.core.events import Actor, EventType, JsonValue
from appliance.errors import Conflict, NotFound
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.invitations import finish_setup
from appliance.store.sessions import may_sign_in, sign_in
from appliance.store.users import (
    Role,
    User,
    every_user,
    find_tenant_id,
    get_user,
    issue_setup_token,
    list_users,
)
from appliance.store.users import user_by_email as _by_email

LAST_OWNER: Final = "is the last owner of this tenant: make another user owner first"


@dataclass(frozen=True, slots=True, kw_only=True)
class Member:
    """A user and when they last signed in (None: never)."""

    user: User
    last_sign_in_at: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reset:
    """A reset user and their new setup token (shown once, in the link)."""

    user: User
    token: str


def find_member(conn: Connection, *, who: str, tenant: str | None = None) -> User:
    """The user ``who`` (an id or an email) names; with ``tenant`` (an id or a unique
    name), only a user of that tenant. NotFound otherwise."""
    user = get_user(conn, user_id=who) if who.startswith("usr_") else None
    user = user or _by_email(conn, email=who)
    if user and tenant is not None and user.tenant_id != find_tenant_id(conn, id_or_name=tenant):
        user = None
    if user is None:
        raise NotFound(f"no user {who}" + ("" if tenant is None else " in this tenant"))
    return user


def members(conn: Connection, *, tenant_id: str | None) -> list[Member]:
    """A tenant's users (None: every user) by email, with their last sign-in (the newest
    session they started)."""
    users = every_user(conn) if tenant_id is None else list_users(conn, tenant_id=tenant_id)
    where, args = ("", ()) if tenant_id is None else (_OF_TENANT, (tenant_id,))
    rows = conn.execute(
        f"SELECT user_id, max(created_at) FROM sessions {where} GROUP BY user_id", args
    ).fetchall()
    last = {str(user_id): int(at) for user_id, at in rows}
    return [Member(user=u, last_sign_in_at=last.get(u.id)) for u in users]


_OF_TENANT: Final = "WHERE user_id IN (SELECT id FROM users WHERE tenant_id = ?)"


def change_role(conn: Connection, *, user: User, role: Role, now: int, actor: Actor) -> User:
    """Give a tenant's user ``role``: ``user.role_changed``. Conflict for the last owner's
    demotion and for an operator (whose role is their own)."""
    tenant_id = _tenant_of(user)
    if user.role is role:
        return user
    if user.role is Role.OWNER:
        _keep_an_owner(conn, user)
    conn.execute("UPDATE users SET role = ? WHERE id = ?", (str(role), user.id))
    _event(conn, tenant_id, EventType.USER_ROLE_CHANGED, user, now, actor,
           role=str(role), previous_role=str(user.role))  # fmt: skip
    return get_user(conn, user_id=user.id) or user


def remove_user(conn: Connection, *, user: User, now: int, actor: Actor) -> User:
    """Delete a tenant's user with their links and sessions: ``user.removed``. Conflict
    for the last owner and for an operator."""
    tenant_id = _tenant_of(user)
    if user.role is Role.OWNER:
        _keep_an_owner(conn, user)
    ended = _end_sessions(conn, user.id, now=now)
    conn.execute("DELETE FROM sessions WHERE user_id = ?", (user.id,))
    conn.execute("DELETE FROM user_setup_tokens WHERE user_id = ?", (user.id,))
    conn.execute("DELETE FROM users WHERE id = ?", (user.id,))
    _event(conn, tenant_id, EventType.USER_REMOVED, user, now, actor,
           role=str(user.role), sessions_ended=ended)  # fmt: skip
    return user


def reset_user(conn: Connection, *, user: User, now: int, actor: Actor) -> Reset:
    """End the user's sessions and links, issue a new setup link: ``user.reset`` (none
    for an operator without a tenant)."""
    ended = _end_sessions(conn, user.id, now=now)
    conn.execute(
        "UPDATE user_setup_tokens SET used_at = ? WHERE user_id = ? AND used_at IS NULL",
        (now, user.id),
    )
    token = issue_setup_token(conn, user_id=user.id, now=now)
    if user.tenant_id is not None:
        _event(conn, user.tenant_id, EventType.USER_RESET, user, now, actor,
               sessions_ended=ended)  # fmt: skip
    return Reset(user=user, token=token)


def change_password(
    conn: Connection, *, user_id: str, keep: str, password_hash: str, now: int
) -> int:
    """Set the signed-in user's new password (its current one checked by the caller) and
    end their sessions but ``keep`` (an id hash): ``user.password_changed``; answers how
    many ended."""
    user = get_user(conn, user_id=user_id)
    if user is None:
        raise NotFound(f"no user {user_id}")
    conn.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user.id))
    ended = _end_sessions(conn, user.id, now=now, keep=keep)
    if user.tenant_id is not None:
        _event(conn, user.tenant_id, EventType.USER_PASSWORD_CHANGED, user, now,
               Actor.user(user.id), sessions_ended=ended)  # fmt: skip
    return ended


def end_other_sessions(conn: Connection, *, user_id: str, keep: str, now: int) -> int:
    """End the user's sessions but ``keep``: ``user.sessions_ended``; answers how many."""
    user = get_user(conn, user_id=user_id)
    if user is None:
        raise NotFound(f"no user {user_id}")
    ended = _end_sessions(conn, user.id, now=now, keep=keep)
    if user.tenant_id is not None:
        _event(conn, user.tenant_id, EventType.USER_SESSIONS_ENDED, user, now,
               Actor.user(user.id), sessions_ended=ended)  # fmt: skip
    return ended


def other_sessions(conn: Connection, *, user_id: str, keep: str) -> int:
    """How many sessions of the user, besides ``keep``, are not revoked."""
    row = conn.execute(
        "SELECT count(*) FROM sessions WHERE user_id = ? AND id_hash <> ? AND revoked_at IS NULL",
        (user_id, keep),
    ).fetchone()
    return 0 if row is None else int(row[0])


def set_up_and_sign_in(
    conn: Connection, *, token: str, password_hash: str, address: str, now: int
) -> tuple[User, str | None]:
    """Use a setup link (:func:`~appliance.store.invitations.finish_setup`) and, when the
    user may sign in, start their session in the same transaction: the user and the
    session's cookie value (None: the user signs in on the login page)."""
    user = finish_setup(conn, token=token, password_hash=password_hash, now=now)
    if not may_sign_in(conn, user):
        return user, None
    return user, sign_in(conn, user=user, address=address, attempt=(), now=now)


def _tenant_of(user: User) -> str:
    if user.operator or user.tenant_id is None:
        raise Conflict(f"{user.email} is an operator: operators are managed with steeple admin")
    return user.tenant_id


def _keep_an_owner(conn: Connection, user: User) -> None:
    row = conn.execute(
        "SELECT count(*) FROM users WHERE tenant_id = ? AND role = 'owner' AND id <> ?"
        " AND disabled_at IS NULL AND operator = 0",
        (user.tenant_id, user.id),
    ).fetchone()
    if row is None or int(row[0]) == 0:
        raise Conflict(f"{user.email} {LAST_OWNER}")


def _end_sessions(conn: Connection, user_id: str, *, now: int, keep: str = "") -> int:
    conn.execute(
        "UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND id_hash <> ?"
        " AND revoked_at IS NULL",
        (now, user_id, keep),
    )
    return conn.changes()


def _event(
    conn: Connection,
    tenant_id: str,
    type: EventType,
    user: User,
    now: int,
    actor: Actor,
    **extra: JsonValue,
) -> None:
    data: dict[str, JsonValue] = {"user_id": user.id, "email": user.email, **extra}
    append_event(conn, tenant_id=tenant_id, type=type, now=now, data=data, actor=actor)
