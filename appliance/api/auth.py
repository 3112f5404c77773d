"""Tenant authentication: ``Authorization: Bearer stk_…`` (docs/architecture.md, "The API").

Keys are looked up by their SHA-256 (``store.tenants.tenant_for_api_key``); the key itself
is never stored or logged. A missing, malformed, unknown or revoked key answers 401 with
``WWW-Authenticate: Bearer`` (RFC 6750), and the answer does not say which of those it was
beyond the RFC's ``error="invalid_token"`` for a key that was presented.

A read-only view authenticates and reads in one database read (:func:`read_as_tenant`):
one hop to a reader thread and one snapshot instead of two. Its request inputs are
checked first (:func:`checked_inputs`), but a request with bad inputs is still
authenticated before its 422, so a missing or wrong key always answers 401 first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from quart import request

from appliance.api.context import context
from appliance.api.problems import Problem
from appliance.errors import ValidationError
from appliance.store.database import Connection
from appliance.store.tenants import tenant_for_api_key

T = TypeVar("T")

_REALM = 'Bearer realm="steeple"'


async def authenticate() -> str:
    """The id of the tenant whose API key authorises this request; raises a 401 Problem."""
    tenant_id = await context().db.read(tenant_for_api_key, api_key=_token())
    if tenant_id is None:
        raise _unknown_key()
    return tenant_id


async def read_as_tenant(fn: Callable[[Connection, str], T]) -> T:
    """``fn(conn, tenant_id)`` for the tenant this request's key authorises, in the same
    read transaction as the key's lookup; raises a 401 Problem (``fn`` does not run)."""
    token = _token()

    def read(conn: Connection) -> T | _UnknownKey:
        tenant_id = tenant_for_api_key(conn, api_key=token)
        return _UnknownKey() if tenant_id is None else fn(conn, tenant_id)

    value = await context().db.read(read)
    if isinstance(value, _UnknownKey):
        raise _unknown_key()
    return value


async def checked_inputs(parse: Callable[[], T]) -> T:
    """``parse()``'s request inputs; when they are invalid, the request is authenticated
    before the ValidationError goes out, so 401 still comes before 422."""
    try:
        return parse()
    except ValidationError:
        await authenticate()
        raise


class _UnknownKey:
    """What the read returns instead of ``fn``'s value when the key is unknown."""


def _token() -> str:
    header = request.headers.get("Authorization")
    if header is None:
        raise _unauthorized("send your API key as 'Authorization: Bearer stk_…'", _REALM)
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("use the Bearer scheme: 'Authorization: Bearer stk_…'", _REALM)
    return token


def _unknown_key() -> Problem:
    return _unauthorized("the API key is unknown or revoked", f'{_REALM}, error="invalid_token"')


def _unauthorized(detail: str, challenge: str) -> Problem:
    return Problem(
        status=401,
        kind="unauthorized",
        title="Authentication required",
        detail=detail,
        headers={"WWW-Authenticate": challenge},
    )
