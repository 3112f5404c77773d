"""Who is asking, and may they: sessions, CSRF, roles and the security headers of every UI
answer (docs/ui.md, "Security").

Rules this module guards:

- A request is signed in only by a live session row (:mod:`appliance.store.sessions`)
  named by the ``steeple_session`` cookie: ``HttpOnly``, ``SameSite=Lax``, ``Secure``
  when the request came over HTTPS (or a trusted proxy says it did).
- Every POST carries a CSRF token, compared in constant time: the session's, as the form
  field ``csrf_token`` or the ``X-CSRF-Token`` header (htmx); or, for sign-in and setup
  (no session yet), the pre-session token of the browser's ``steeple_form`` cookie
  (``SameSite=Strict``, random), echoed by the form (double submit). A missing or wrong
  token, or an ``Origin`` other than this host's (``null`` too: a sandboxed frame),
  answers 403 and changes nothing.
- Roles are checked on the server for every route: viewer reads, editor also changes
  schedules and replays, owner also manages keys, secrets and users. Another tenant's
  ids are NotFound (a 404 page), as in the API: views pass the session's tenant to the
  store, which scopes every query.
- Every answer carries a strict Content-Security-Policy (no inline script or style),
  ``X-Frame-Options: DENY``, ``nosniff`` and ``Referrer-Policy: same-origin``; pages
  for a signed-in user are ``Cache-Control: no-store``.
"""

from __future__ import annotations

import hmac
import re
import secrets
from typing import Final
from urllib.parse import urlsplit

from quart import Response, g, request

from appliance.core.forwarded import client_address as forwarded_client
from appliance.core.forwarded import forwarded_https
from appliance.store.sessions import Session, find_session, needs_touch, touch_session
from appliance.store.users import Role
from appliance.ui.context import ui

COOKIE: Final = "steeple_session"
PRESESSION_COOKIE: Final = "steeple_form"  # the sign-in and setup forms' token
_TOKEN: Final = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
CSRF_FIELD: Final = "csrf_token"
CSRF_HEADER: Final = "X-CSRF-Token"
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none';"
    " form-action 'self'"
)
_RANK: Final = {Role.VIEWER: 1, Role.EDITOR: 2, Role.OWNER: 3}
# Endpoints that take a POST without a session: their token is the pre-session one.
SESSIONLESS_POSTS: Final = frozenset({"ui.login", "ui.setup"})


class SignInRequired(Exception):
    """No live session: the answer is a redirect to /login."""


class Forbidden(Exception):
    """Signed in, but this role or request may not do this (403 page)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def load_session() -> None:
    """``before_request``: the request's session into ``g``, then the CSRF check."""
    g.ui_session = None
    token = request.cookies.get(COOKIE)
    if token:
        ctx = ui()
        now = ctx.clock.now_ms()
        session = await ctx.db.read(find_session, token=token, now=now)
        if session is not None and needs_touch(session, now=now):
            await ctx.db.write(touch_session, id_hash=session.id_hash, now=now)
        g.ui_session = session
    if request.method == "POST":
        await _check_post()


async def _check_post() -> None:
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        raise Forbidden("This form was sent from another site.")  # "null" has no host
    form = await request.form
    sent = form.get(CSRF_FIELD) or ""
    if request.endpoint in SESSIONLESS_POSTS:
        expected = request.cookies.get(PRESESSION_COOKIE, "")
    else:
        session = current_session()
        if session is None:
            raise SignInRequired
        sent, expected = sent or request.headers.get(CSRF_HEADER) or "", session.csrf_token
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise Forbidden("This form is missing its security token or it expired; reload the page.")


def presession_token() -> str:
    """The token the sign-in and setup forms carry: the browser's ``steeple_form`` cookie,
    or a new random one (the view sets it with :func:`set_presession_cookie`)."""
    sent = request.cookies.get(PRESESSION_COOKIE, "")
    return sent if _TOKEN.fullmatch(sent) else secrets.token_urlsafe(32)


def set_presession_cookie(response: Response, token: str) -> None:
    response.set_cookie(
        PRESESSION_COOKIE, token, httponly=True, samesite="Strict", secure=is_secure(), path="/"
    )


def current_session() -> Session | None:
    session = g.get("ui_session")
    return session if isinstance(session, Session) else None


def require(role: Role = Role.VIEWER) -> tuple[Session, str]:
    """The session and its tenant id when its user has at least ``role`` in a tenant;
    raises SignInRequired or Forbidden."""
    session = current_session()
    if session is None:
        raise SignInRequired
    tenant_id = session.user.tenant_id
    if tenant_id is None:
        raise Forbidden("Operators without a tenant have no tenant pages.")
    if _RANK[session.user.role] < _RANK[role]:
        raise Forbidden(f"Your role ({session.user.role}) may not do this; ask an owner.")
    return session, tenant_id


def is_secure() -> bool:
    """HTTPS to the client: the connection's, or the trusted proxies' word for it."""
    proto = request.headers.getlist("X-Forwarded-Proto")
    return forwarded_https(request.scheme, proto, ui().trust_proxy)


def client_address() -> str:
    """The client's address under the ``trust_proxy`` rule (appliance.core.forwarded)."""
    forwarded = request.headers.getlist("X-Forwarded-For")
    return forwarded_client(request.remote_addr, forwarded, ui().trust_proxy)


def set_session_cookie(response: Response, token: str) -> None:
    response.set_cookie(COOKIE, token, httponly=True, samesite="Lax", secure=is_secure(), path="/")


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Lax", secure=is_secure())


def add_security_headers(response: Response) -> Response:
    """``after_request``: the headers every UI answer carries."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    static = (request.endpoint or "").endswith(".static")
    if not static and (current_session() is not None or response.mimetype == "text/html"):
        response.headers["Cache-Control"] = "no-store"
    return response
