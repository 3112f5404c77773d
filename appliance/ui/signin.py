"""``/login``, ``/logout`` and ``/setup/<token>`` (docs/ui.md, "People and sign-in").

Sign-in answers one generic message for an unknown email, a wrong password, a user
without a password yet, a disabled user and a user of a suspended tenant, and spends the
same argon2 time on each. Every attempt is counted per account and per address before
its password is checked, and forgiven only when it succeeds; at ``MAX_FAILURES`` in the
window, sign-in is refused for that subject (429) without checking the password. Password
work runs in its own bounded pool (``ui/hashing.py``): when it is full, a sign-in is
refused at once (503, ``Retry-After``). A successful sign-in always starts a new session
row (no fixation); signing out revokes it. Using a setup link signs its user in (a new
session, ``user.signed_in``, in the transaction that sets the password); a user who may
not sign in then lands on the login page with their email filled in. A sign-in is
``user.signed_in`` in the user's tenant; a counted failure at a tenant's user is
``user.sign_in_failed`` there, and at an email no tenant has, a line of the operator's
log (``ui/sign_in_log.py``).
"""

from __future__ import annotations

import enum
from urllib.parse import quote

from quart import Blueprint, Response, redirect, request

from appliance.core.passwords import check_password_rules, hash_password, verify_password
from appliance.errors import NotFound, ValidationError
from appliance.store.invitations import DEAD_LINK, setup_email
from appliance.store.people import set_up_and_sign_in
from appliance.store.sessions import (
    FAILURE_WINDOW_MS,
    end_session,
    login_subjects,
    record_failed_sign_in,
    reserve_attempt,
    sign_in,
    sign_in_user,
)
from appliance.store.users import User
from appliance.ui.context import ui
from appliance.ui.hashing import RETRY_AFTER_S, HashingBusy
from appliance.ui.redirects import local_path
from appliance.ui.render import page
from appliance.ui.security import (
    PRESESSION_COOKIE,
    clear_session_cookie,
    client_address,
    current_session,
    presession_token,
    set_presession_cookie,
    set_session_cookie,
)
from appliance.ui.sign_in_log import operator_signed_in

GENERIC_ERROR = "The email or password is not right."
THROTTLED = f"Too many failed sign-ins; try again in {FAILURE_WINDOW_MS // 60_000} minutes."
BUSY = f"Too many people are signing in right now; try again in {RETRY_AFTER_S} seconds."


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/login", view_func=login_form, methods=["GET"])
    bp.add_url_rule("/login", view_func=login, methods=["POST"], endpoint="login")
    bp.add_url_rule("/logout", view_func=logout, methods=["POST"])
    bp.add_url_rule("/setup/<token>", view_func=setup_form, methods=["GET"])
    bp.add_url_rule("/setup/<token>", view_func=setup, methods=["POST"], endpoint="setup")


async def login_form() -> Response:
    if current_session() is not None:
        return redirect("/")  # type: ignore[return-value]
    return await _form("login.html", next=_next(), email=request.args.get("email", "")[:254])


async def login() -> Response:
    ctx = ui()
    target = _next()  # judged before anything is written
    form = await request.form
    email, password = form.get("email", ""), form.get("password", "")
    try:
        with ctx.passwords.admit():
            outcome = await _attempt(email, password)
    except HashingBusy:
        return await _busy("login.html", next=target, email=email)
    if outcome is Refused.THROTTLED:
        return await _form("login.html", status=429, error=THROTTLED, next=target, email=email)
    if outcome is Refused.WRONG:
        return await _form("login.html", status=401, error=GENERIC_ERROR, next=target, email=email)
    user, attempt = outcome
    token = await ctx.db.write(
        sign_in, user=user, address=client_address(), attempt=attempt, now=ctx.clock.now_ms()
    )
    if user.tenant_id is None:
        operator_signed_in(email=user.email, address=client_address())
    response = redirect(target)
    set_session_cookie(response, token)  # type: ignore[arg-type]
    return response  # type: ignore[return-value]


class Refused(enum.Enum):
    THROTTLED = "throttled"
    WRONG = "wrong"  # the one generic answer: unknown, wrong, no password, disabled


async def _attempt(email: str, password: str) -> tuple[User, tuple[int, ...]] | Refused:
    """Count the attempt (refused when a subject is throttled), then check the password:
    the user and the counted attempt's rows, or why not."""
    ctx = ui()
    subjects = login_subjects(email=email, address=client_address())
    attempt = await ctx.db.write(reserve_attempt, subjects=subjects, now=ctx.clock.now_ms())
    if attempt is None:
        return Refused.THROTTLED
    user = await ctx.db.read(sign_in_user, email=email)  # None: unknown, disabled, suspended
    stored = None if user is None else user.password_hash
    ok = await ctx.passwords.run(verify_password, stored, password)
    if user is None or not ok:
        await _failed(email)
        return Refused.WRONG
    return user, attempt


async def _failed(email: str) -> None:
    """Audit a counted attempt that failed: in the tenant of the user it names, else in
    the operator's log (ui/sign_in_log.py)."""
    ctx = ui()
    address, now = client_address(), ctx.clock.now_ms()
    if not await ctx.db.write(record_failed_sign_in, email=email, address=address, now=now):
        ctx.unknown_sign_ins.failed(address=address, now=now)


async def _busy(template: str, **context: object) -> Response:
    """Too many sign-ins at once: refused now, with when to try again (ui/hashing.py)."""
    response = await _form(template, status=503, error=BUSY, **context)
    response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


async def logout() -> Response:
    session = current_session()
    if session is not None:
        ctx = ui()
        await ctx.db.write(end_session, id_hash=session.id_hash, now=ctx.clock.now_ms())
    response = redirect("/login?done=signed-out")
    clear_session_cookie(response)  # type: ignore[arg-type]
    return response  # type: ignore[return-value]


async def setup_form(token: str) -> Response:
    ctx = ui()
    email = await ctx.db.read(setup_email, token=token, now=ctx.clock.now_ms())
    if email is None:
        raise NotFound(DEAD_LINK)
    return await _form("setup.html", email=email, token=token, errors={})


async def setup(token: str) -> Response:
    ctx = ui()
    form = await request.form
    password = form.get("password", "")
    email = await ctx.db.read(setup_email, token=token, now=ctx.clock.now_ms())
    if email is None:
        raise NotFound(DEAD_LINK)
    try:
        check_password_rules(password)
        if password != form.get("repeat", ""):
            raise ValidationError.single("repeat", "the two passwords differ")
    except ValidationError as error:
        errors = {e.field: e.message for e in error.errors}
        return await _form("setup.html", status=422, email=email, token=token, errors=errors)
    try:
        with ctx.passwords.admit():
            hashed = await ctx.passwords.run(hash_password, password)
    except HashingBusy:
        return await _busy("setup.html", email=email, token=token, errors={})
    user, cookie = await ctx.db.write(
        set_up_and_sign_in,
        token=token,
        password_hash=hashed,
        address=client_address(),
        now=ctx.clock.now_ms(),
    )
    if cookie is None:  # may not sign in now (a suspended tenant): the login, email filled in
        return redirect(f"/login?done=ready&email={quote(user.email)}")  # type: ignore[return-value]
    if user.tenant_id is None:
        operator_signed_in(email=user.email, address=client_address())
    response = redirect("/")
    set_session_cookie(response, cookie)  # type: ignore[arg-type]
    return response  # type: ignore[return-value]


async def _form(template: str, *, status: int = 200, **values: object) -> Response:
    """A sign-in or setup page with the browser's pre-session token, as cookie and field."""
    token = presession_token()
    response = await page(template, status=status, form_token=token, **values)
    if token != request.cookies.get(PRESESSION_COOKIE):
        set_presession_cookie(response, token)
    return response


def _next() -> str:
    """Where to go after sign-in: a path on this origin, else the dashboard."""
    return local_path(request.args.get("next", "/"), "/")
