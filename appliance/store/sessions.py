"""Server-side sessions of the web UI and the throttle on sign-in failures
(docs/ui.md, "Security").

Rules this module guards:

- A session is a row: the cookie holds 256 random bits, the row their SHA-256, so a copy
  of the database signs nobody in. A session ends when revoked (sign out, password set),
  after ``IDLE_MS`` without a request, or ``LIFETIME_MS`` after sign-in, whichever first.
- Each session has its own CSRF token (a synchronizer token) that every state-changing
  form carries; it is compared in constant time by the caller.
- ``last_seen_at`` is written at most once a minute, so reading pages stays reads.
- Sign-in is throttled per account and per address: ``MAX_FAILURES`` failures inside
  ``FAILURE_WINDOW_MS`` refuse further tries for that subject until old ones age out.
  An attempt is counted *before* its password is checked (:func:`reserve_attempt`: the
  count and the new rows in one write transaction, so concurrent attempts cannot all
  pass one reading of the count) and forgiven only when it succeeds
  (:func:`forgive_attempt`); an attempt the process never finishes stays counted.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Final

from appliance.core.events import Actor, EventType, JsonValue
from appliance.store.events import append_event
from appliance.store.infra.connection import Connection
from appliance.store.suspension import is_suspended
from appliance.store.users import User, get_user, user_by_email

IDLE_MS: Final = 12 * 3_600_000
LIFETIME_MS: Final = 7 * 86_400_000
SEEN_RESOLUTION_MS: Final = 60_000
MAX_FAILURES: Final = 10
FAILURE_WINDOW_MS: Final = 15 * 60_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    id_hash: str
    user: User
    csrf_token: str
    created_at: int
    last_seen_at: int


def start_session(conn: Connection, *, user_id: str, address: str, now: int) -> str:
    """A new session for ``user_id``; answers the cookie value (shown only to the browser)."""
    token = secrets.token_urlsafe(32)
    conn.execute(
        "INSERT INTO sessions (id_hash, user_id, csrf_token, created_at, last_seen_at, address)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (_digest(token), user_id, secrets.token_urlsafe(32), now, now, address),
    )
    return token


def sign_in(
    conn: Connection, *, user: User, address: str, attempt: tuple[int, ...], now: int
) -> str:
    """A sign-in whose password was right: its counted attempt forgiven, a new session
    (:func:`start_session`'s cookie value) and, for a tenant's user, ``user.signed_in``,
    in one transaction."""
    forgive_attempt(conn, ids=attempt)
    if user.tenant_id is not None:
        append_event(
            conn, tenant_id=user.tenant_id, type=EventType.USER_SIGNED_IN, now=now,
            data=_who(user, address), actor=Actor.user(user.id),
        )  # fmt: skip
    return start_session(conn, user_id=user.id, address=address, now=now)


def record_failed_sign_in(conn: Connection, *, email: str, address: str, now: int) -> bool:
    """A counted attempt at ``email`` failed: ``user.sign_in_failed`` in the tenant of the
    user it names. False (nothing written) when no tenant's user has that email — the
    caller tells the operator's log, as no tenant may learn of it. (The throttle bounds
    these events: only counted attempts get here.)"""
    user = user_by_email(conn, email=email)
    if user is None or user.tenant_id is None:
        return False
    if user.disabled_at is not None:
        reason = "disabled"
    elif not may_sign_in(conn, user):
        reason = "tenant_suspended"
    else:
        reason = "wrong_password" if user.password_hash is not None else "no_password"
    append_event(
        conn, tenant_id=user.tenant_id, type=EventType.USER_SIGN_IN_FAILED, now=now,
        data=_who(user, address) | {"reason": reason},
    )  # fmt: skip
    return True


def _who(user: User, address: str) -> dict[str, JsonValue]:
    return {"user_id": user.id, "email": user.email, "address": address[:200]}


def find_session(conn: Connection, *, token: str, now: int) -> Session | None:
    """The live session of a cookie value, or None (unknown, revoked, idle, too old, its
    user disabled or its tenant suspended)."""
    row = conn.execute(
        "SELECT id_hash, user_id, csrf_token, created_at, last_seen_at FROM sessions"
        " WHERE id_hash = ? AND revoked_at IS NULL AND last_seen_at > ? AND created_at > ?",
        (_digest(token), now - IDLE_MS, now - LIFETIME_MS),
    ).fetchone()
    if row is None:
        return None
    id_hash, user_id, csrf_token, created_at, last_seen_at = row
    user = get_user(conn, user_id=str(user_id))
    if user is None or not may_sign_in(conn, user):
        return None
    return Session(
        id_hash=str(id_hash),
        user=user,
        csrf_token=str(csrf_token),
        created_at=int(created_at),
        last_seen_at=int(last_seen_at),
    )


def may_sign_in(conn: Connection, user: User) -> bool:
    """A disabled user, or a user of a suspended tenant (operators excepted: they resume
    it), may not sign in, and their sessions stop working."""
    if user.disabled_at is not None:
        return False
    return user.operator or not is_suspended(conn, tenant_id=user.tenant_id)


def sign_in_user(conn: Connection, *, email: str) -> User | None:
    """The user ``email`` names if that user may sign in now, else None."""
    user = user_by_email(conn, email=email)
    return user if user is not None and may_sign_in(conn, user) else None


def needs_touch(session: Session, *, now: int) -> bool:
    return now - session.last_seen_at >= SEEN_RESOLUTION_MS


def touch_session(conn: Connection, *, id_hash: str, now: int) -> None:
    conn.execute(
        "UPDATE sessions SET last_seen_at = ? WHERE id_hash = ? AND last_seen_at < ?",
        (now, id_hash, now),
    )


def end_session(conn: Connection, *, id_hash: str, now: int) -> None:
    conn.execute(
        "UPDATE sessions SET revoked_at = ? WHERE id_hash = ? AND revoked_at IS NULL",
        (now, id_hash),
    )


def throttled(conn: Connection, *, subjects: tuple[str, ...], now: int) -> bool:
    """Whether any subject (``email:…``, ``addr:…``) has used up its failures."""
    for subject in subjects:
        row = conn.execute(
            "SELECT count(*) FROM login_failures WHERE subject = ? AND at > ?",
            (subject, now - FAILURE_WINDOW_MS),
        ).fetchone()
        if row is not None and int(row[0]) >= MAX_FAILURES:
            return True
    return False


def reserve_attempt(
    conn: Connection, *, subjects: tuple[str, ...], now: int
) -> tuple[int, ...] | None:
    """Count one sign-in attempt against every subject, as a failure until forgiven; the
    rows' ids, or None (nothing written) when a subject has used up its failures. A write:
    on SQLite the single writer, on PostgreSQL ``SERIALIZABLE``, make the count and the
    insert one step."""
    conn.execute("DELETE FROM login_failures WHERE at <= ?", (now - FAILURE_WINDOW_MS,))
    if throttled(conn, subjects=subjects, now=now):
        return None
    return tuple(
        int(conn.execute(
            "INSERT INTO login_failures (subject, at) VALUES (?, ?) RETURNING id", (subject, now)
        ).fetchone()[0])
        for subject in subjects
    )  # fmt: skip


def forgive_attempt(conn: Connection, *, ids: tuple[int, ...]) -> None:
    """An attempt :func:`reserve_attempt` counted succeeded: it is no failure."""
    conn.executemany("DELETE FROM login_failures WHERE id = ?", [(i,) for i in ids])


def login_subjects(*, email: str, address: str) -> tuple[str, ...]:
    return (f"email:{email.strip().lower()}", f"addr:{address}")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
