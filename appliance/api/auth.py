"""Tenant authentication: ``Authorization: Bearer stk_…`` (DESIGN §7).

Keys are looked up by their SHA-256 (``store.tenants.tenant_for_api_key``); the key itself
is never stored or logged. A missing, malformed, unknown or revoked key answers 401 with
``WWW-Authenticate: Bearer`` (RFC 6750), and the answer does not say which of those it was
beyond the RFC's ``error="invalid_token"`` for a key that was presented.
"""

from __future__ import annotations

from quart import request

from appliance.api.context import context
from appliance.api.problems import Problem
from appliance.store.tenants import tenant_for_api_key

_REALM = 'Bearer realm="steeple"'


async def authenticate() -> str:
    """The id of the tenant whose API key authorises this request; raises a 401 Problem."""
    header = request.headers.get("Authorization")
    if header is None:
        raise _unauthorized("send your API key as 'Authorization: Bearer stk_…'", _REALM)
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("use the Bearer scheme: 'Authorization: Bearer stk_…'", _REALM)
    tenant_id = await context().db.read(tenant_for_api_key, api_key=token)
    if tenant_id is None:
        raise _unauthorized("the API key is unknown or revoked", f'{_REALM}, error="invalid_token"')
    return tenant_id


def _unauthorized(detail: str, challenge: str) -> Problem:
    return Problem(
        status=401,
        kind="unauthorized",
        title="Authentication required",
        detail=detail,
        headers={"WWW-Authenticate": challenge},
    )
