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
"""

from __future__ import annotations

from quart import Blueprint, Response, redirect, request

from appliance.core.events import Actor
from appliance.core.json_text import whole_number
from appliance.errors import NotFound, ValidationError
from appliance.store.api_keys import (
    get_api_key,
    issue_api_key,
    list_api_keys,
    parse_key_request,
    revoke_api_key,
)
from appliance.store.invitations import invite_user, tenant_people
from appliance.store.secret_reveal import reveal_signing_secret
from appliance.store.tenants import (
    SigningSecret,
    list_signing_secrets,
    parse_overlap,
    rotate_signing_secret,
)
from appliance.store.users import Role
from appliance.ui.context import public_base_url, ui
from appliance.ui.render import page
from appliance.ui.security import require


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


async def users(*, link: str | None = None, status: int = 200) -> Response:
    _, tenant_id = require(Role.OWNER)
    now = ui().clock.now_ms()
    people = await ui().db.read(tenant_people, tenant_id=tenant_id, now=now)
    return await page(
        "users.html",
        status=status,
        users=people.users,
        invited=people.invited,
        link=link,
        roles=list(Role),
    )


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


def form_role(text: str) -> Role:
    """The role a form's ``role`` field names; ValidationError otherwise."""
    if text not in tuple(Role):
        raise ValidationError.single("role", "must be owner, editor or viewer")
    return Role(text)


def setup_link(token: str) -> str:
    """A setup link, on the configured public URL (never the request's Host)."""
    return f"{public_base_url()}/setup/{token}"
