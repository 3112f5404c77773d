"""``/settings/keys``, ``/settings/secrets`` and ``/settings/users``: owner pages over the
store functions ``/v1/keys``, ``/v1/signing-secrets`` and ``steeple user create`` use.

A new API key or signing secret is shown once, on the answer to the POST that made it
(``Cache-Control: no-store``, like every signed-in page), never again; lists show masks
and prefixes only. An owner may reveal an active signing secret again: a POST (CSRF like
every form) whose answer shows it once, and which records ``signing_secret.revealed``
naming the owner (:mod:`appliance.store.secret_reveal`). Revoking a key takes a
confirmation page (GET) naming it; its POST revokes. Every key, secret and user change
is an event naming the owner. Adding a user is an invitation
(:func:`appliance.store.invitations.invite_user`): a single-use setup link (an hour),
shown once, and the same answer whether or not the email has an account elsewhere.
Changing a role, removing a user (after a confirmation page naming them) and issuing
a fresh setup link (a reset) are :mod:`appliance.store.people`, as ``steeple user
set-role|remove|reset`` are; the last owner's removal or demotion is refused on the
users page (409) and changes nothing.

``/settings/account`` is every signed-in user's (operators' too): change one's password
(the current one required, checked in the hashing pool like a sign-in) and end one's
other sessions.
"""

from __future__ import annotations

from quart import Blueprint, Response, redirect, request

from appliance.core.events import Actor
from appliance.core.json_text import whole_number
from appliance.core.passwords import check_password_rules, hash_password, verify_password
from appliance.errors import Conflict, NotFound, ValidationError
from appliance.store.api_keys import (
    get_api_key,
    issue_api_key,
    list_api_keys,
    parse_key_request,
    revoke_api_key,
)
from appliance.store.infra.connection import Connection
from appliance.store.invitations import Invitation, invite_user, pending_invitations
from appliance.store.people import (
    Member,
    change_password,
    change_role,
    end_other_sessions,
    find_member,
    members,
    other_sessions,
    remove_user,
    reset_user,
)
from appliance.store.secret_reveal import reveal_signing_secret
from appliance.store.sessions import Session
from appliance.store.tenants import (
    SigningSecret,
    list_signing_secrets,
    parse_overlap,
    rotate_signing_secret,
)
from appliance.store.users import Role
from appliance.ui.context import public_base_url, ui
from appliance.ui.hashing import HashingBusy
from appliance.ui.render import page
from appliance.ui.security import SignInRequired, current_session, require


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/settings/keys", view_func=keys, methods=["GET"])
    bp.add_url_rule("/settings/keys", view_func=create_key, methods=["POST"])
    bp.add_url_rule("/settings/keys/<key_id>/revoke", view_func=revoke_form, methods=["GET"])
    bp.add_url_rule("/settings/keys/<key_id>/revoke", view_func=revoke_key, methods=["POST"])
    bp.add_url_rule("/settings/secrets", view_func=secrets, methods=["GET"])
    bp.add_url_rule("/settings/secrets/rotate", view_func=rotate, methods=["POST"])
    bp.add_url_rule("/settings/secrets/<secret_id>/reveal", view_func=reveal, methods=["POST"])
    bp.add_url_rule("/settings/users", view_func=users, methods=["GET"])
    bp.add_url_rule("/settings/users", view_func=add_user, methods=["POST"])
    bp.add_url_rule("/settings/users/<user_id>/role", view_func=set_role, methods=["POST"])
    bp.add_url_rule("/settings/users/<user_id>/remove", view_func=remove_form, methods=["GET"])
    bp.add_url_rule("/settings/users/<user_id>/remove", view_func=remove, methods=["POST"])
    bp.add_url_rule("/settings/users/<user_id>/reset", view_func=reset, methods=["POST"])
    bp.add_url_rule("/settings/account", view_func=account, methods=["GET"])
    bp.add_url_rule("/settings/account/password", view_func=new_password, methods=["POST"])
    bp.add_url_rule("/settings/account/sessions", view_func=end_sessions, methods=["POST"])


async def keys(*, issued: str | None = None, status: int = 200) -> Response:
    _, tenant_id = require(Role.OWNER)
    listed = await ui().db.read(list_api_keys, tenant_id=tenant_id)
    return await page("keys.html", status=status, keys=listed, issued=issued)


async def create_key() -> Response:
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    form = await request.form
    name, scope = parse_key_request({"name": form.get("name", ""), "scope": form.get("scope")})
    made = await ctx.db.write(
        issue_api_key,
        tenant_id=tenant_id,
        name=name,
        scope=scope,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    return await keys(issued=made.api_key, status=201)


async def revoke_form(key_id: str) -> Response:
    """The confirmation a revocation needs: it names the key; its POST revokes."""
    _, tenant_id = require(Role.OWNER)
    key = await ui().db.read(get_api_key, key_id=key_id)
    if key is None or key.tenant_id != tenant_id or key.revoked_at is not None:
        raise NotFound(f"no API key {key_id}")
    return await page("key_revoke.html", key=key)


async def revoke_key(key_id: str) -> Response:
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    await ctx.db.write(
        revoke_api_key,
        tenant_id=tenant_id,
        key_id=key_id,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    return redirect("/settings/keys?done=revoked")  # type: ignore[return-value]


async def secrets(
    *, created: str | None = None, revealed: SigningSecret | None = None, status: int = 200
) -> Response:
    _, tenant_id = require(Role.OWNER)
    now = ui().clock.now_ms()
    listed = await ui().db.read(list_signing_secrets, tenant_id=tenant_id, now=now)
    return await page(
        "secrets.html", status=status, secrets=listed, created=created, revealed=revealed
    )


async def reveal(secret_id: str) -> Response:
    """One active secret whole, on this answer only; the reveal is an event."""
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    secret = await ctx.db.write(
        reveal_signing_secret,
        tenant_id=tenant_id,
        secret_id=secret_id,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    return await secrets(revealed=secret)


async def rotate() -> Response:
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    given = whole_number((await request.form).get("overlap_seconds", ""))
    if given is None:
        raise ValidationError.single("overlap_seconds", "must be a whole number of seconds")
    overlap_s = parse_overlap({"overlap_seconds": given})
    secret = await ctx.db.write(
        rotate_signing_secret,
        tenant_id=tenant_id,
        overlap_ms=overlap_s * 1000,
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    return await secrets(created=secret.secret, status=201)


async def users(
    *,
    link: str | None = None,
    message: str | None = None,
    error: str | None = None,
    status: int = 200,
) -> Response:
    _, tenant_id = require(Role.OWNER)
    now = ui().clock.now_ms()
    listed, invited = await ui().db.read(_people, tenant_id=tenant_id, now=now)
    return await page(
        "users.html",
        status=status,
        members=listed,
        invited=invited,
        link=link,
        message=message,
        error=error,
        roles=list(Role),
    )


def _people(conn: Connection, *, tenant_id: str, now: int) -> tuple[list[Member], list[Invitation]]:
    """The tenant's users and pending invitations in one snapshot (an invitation used
    meanwhile shows once)."""
    return members(conn, tenant_id=tenant_id), pending_invitations(
        conn, tenant_id=tenant_id, now=now
    )


async def set_role(user_id: str) -> Response:
    role = form_role((await request.form).get("role", ""))
    return await _manage(user_id, "role", role)


async def remove_form(user_id: str) -> Response:
    """The confirmation a removal needs: it names the user; its POST removes."""
    _, tenant_id = require(Role.OWNER)
    member = await ui().db.read(find_member, who=user_id, tenant=tenant_id)
    return await page("user_remove.html", member=member)


async def remove(user_id: str) -> Response:
    return await _manage(user_id, "remove", None)


async def reset(user_id: str) -> Response:
    return await _manage(user_id, "reset", None)


async def _manage(user_id: str, action: str, role: Role | None) -> Response:
    """One change to a user of the owner's tenant; the last owner's is refused (409)."""
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    try:
        email, token = await ctx.db.write(
            _change,
            tenant_id=tenant_id,
            user_id=user_id,
            action=action,
            role=role,
            now=ctx.clock.now_ms(),
            actor=Actor.user(session.user.id),
        )
    except Conflict as refused:
        return await users(error=str(refused), status=409)
    return await _answer(action, email, token)


async def _answer(action: str, email: str, token: str | None) -> Response:
    if action == "reset" and token is not None:
        return await users(link=setup_link(token), message=f"Sessions of {email} ended.")
    if action == "remove":
        return await users(message=f"{email} removed; their sessions ended.")
    return await users(message=f"Role of {email} changed.")


def _change(
    conn: Connection,
    *,
    tenant_id: str,
    user_id: str,
    action: str,
    role: Role | None,
    now: int,
    actor: Actor,
) -> tuple[str, str | None]:
    """The store change (one transaction): the user's email and a reset's new token."""
    user = find_member(conn, who=user_id, tenant=tenant_id)
    if action == "role" and role is not None:
        change_role(conn, user=user, role=role, now=now, actor=actor)
    elif action == "remove":
        remove_user(conn, user=user, now=now, actor=actor)
    else:
        return user.email, reset_user(conn, user=user, now=now, actor=actor).token
    return user.email, None


async def add_user() -> Response:
    session, tenant_id = require(Role.OWNER)
    ctx = ui()
    form = await request.form
    invited = await ctx.db.write(
        invite_user,
        tenant=tenant_id,
        email=form.get("email", ""),
        role=form_role(form.get("role", "")),
        now=ctx.clock.now_ms(),
        actor=Actor.user(session.user.id),
    )
    return await users(link=setup_link(invited.token), status=201)


async def account(
    *, errors: dict[str, str] | None = None, message: str | None = None, status: int = 200
) -> Response:
    """One's own account: the password form and the other sessions to end."""
    session = _signed_in()
    others = await ui().db.read(other_sessions, user_id=session.user.id, keep=session.id_hash)
    return await page(
        "account.html",
        status=status,
        errors=errors or {},
        message=message,
        others=others,
    )


async def new_password() -> Response:
    """The current password checked, the rule, the repeat; then the new hash is stored
    and the user's other sessions end (this one stays signed in)."""
    session = _signed_in()
    ctx = ui()
    form = await request.form
    current, password = form.get("current", ""), form.get("password", "")
    try:
        check_password_rules(password)
        if password != form.get("repeat", ""):
            raise ValidationError.single("repeat", "the two passwords differ")
        with ctx.passwords.admit():
            if not await ctx.passwords.run(verify_password, session.user.password_hash, current):
                raise ValidationError.single("current", "is not your current password")
            hashed = await ctx.passwords.run(hash_password, password)
    except ValidationError as error:
        return await account(errors={e.field: e.message for e in error.errors}, status=422)
    except HashingBusy:
        return await account(message="The server is busy; try again in a moment.", status=503)
    ended = await ctx.db.write(
        change_password,
        user_id=session.user.id,
        keep=session.id_hash,
        password_hash=hashed,
        now=ctx.clock.now_ms(),
    )
    return await account(message=f"Password changed; {_sessions(ended)} ended.")


async def end_sessions() -> Response:
    session = _signed_in()
    ctx = ui()
    ended = await ctx.db.write(
        end_other_sessions, user_id=session.user.id, keep=session.id_hash, now=ctx.clock.now_ms()
    )
    return await account(message=f"{_sessions(ended).capitalize()} ended.")


def _sessions(count: int) -> str:
    return f"{count} other session" + ("" if count == 1 else "s")


def _signed_in() -> Session:
    session = current_session()
    if session is None:
        raise SignInRequired
    return session


def form_role(text: str) -> Role:
    """The role a form's ``role`` field names; ValidationError otherwise."""
    if text not in tuple(Role):
        raise ValidationError.single("role", "must be owner, editor or viewer")
    return Role(text)


def setup_link(token: str) -> str:
    """A setup link, on the configured public URL (never the request's Host)."""
    return f"{public_base_url()}/setup/{token}"
