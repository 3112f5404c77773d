"""Tenant authentication: ``Authorization: Bearer stk_…`` (docs/architecture.md, "The API").

Keys are looked up by their SHA-256 (``store.api_keys.caller_for_api_key``); the key itself
is never stored or logged. A missing, malformed, unknown or revoked key answers 401 with
``WWW-Authenticate: Bearer`` (RFC 6750), and the answer does not say which of those it was
beyond the RFC's ``error="invalid_token"`` for a key that was presented.

Scopes are secure by default: a request whose method can change something (anything but
GET and HEAD) needs a ``write`` key unless its view declares itself a read
(``authenticate(write=False)``, e.g. the cron preview). A ``read`` key on a write answers
403 and changes nothing. A key of a suspended tenant answers 403 ``tenant-suspended``
on every route (docs/operations.md, "Suspending a tenant"). A key's ``last_used_at`` is
refreshed at most once a minute.

A read-only view authenticates and reads in one database read (:func:`read_as_tenant`):
one hop to a reader thread and one snapshot instead of two. Its request inputs are
checked first (:func:`checked_inputs`), but a request with bad inputs is still
authenticated before its 422, so a missing or wrong key always answers 401 first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from quart import request

from appliance.api.context import context
from appliance.api.problems import Problem
from appliance.errors import ValidationError
from appliance.store.api_keys import (
    Caller,
    Scope,
    caller_for_api_key,
    needs_last_used,
    touch_api_key,
)
from appliance.store.infra.connection import Connection

T = TypeVar("T")

_REALM = 'Bearer realm="steeple"'


async def authenticate(*, write: bool | None = None) -> str:
    """The id of the tenant whose API key authorises this request; raises a 401 Problem,
    or a 403 Problem when the request writes (``write``; by default: its method is not
    GET or HEAD) and the key is a read key."""
    return (await authenticate_caller(write=write)).tenant_id


async def authenticate_caller(*, write: bool | None = None) -> Caller:
    """:func:`authenticate`, answering with the key's identity (for events' ``actor``)."""
    caller = await context().db.read(caller_for_api_key, api_key=_token())
    if caller is None:
        raise _unknown_key()
    _refuse_suspended(caller)
    _require_scope(caller, write)
    await _note_use(caller)
    return caller


async def read_as_tenant(fn: Callable[[Connection, str], T]) -> T:
    """``fn(conn, tenant_id)`` for the tenant this request's key authorises, in the same
    read transaction as the key's lookup; raises a 401 Problem (``fn`` does not run)."""
    return (await read_as_caller(fn))[1]


async def read_as_caller(fn: Callable[[Connection, str], T]) -> tuple[Caller, T]:
    """:func:`read_as_tenant`, answering with the key's identity too (its scope decides
    what a read may show, e.g. masked headers)."""
    token = _token()

    def read(conn: Connection) -> tuple[Caller, T] | Caller | _UnknownKey:
        caller = caller_for_api_key(conn, api_key=token)
        if caller is None:
            return _UnknownKey()
        return caller if caller.suspended else (caller, fn(conn, caller.tenant_id))

    value = await context().db.read(read)
    if isinstance(value, _UnknownKey):
        raise _unknown_key()
    if isinstance(value, Caller):
        _refuse_suspended(value)
    assert isinstance(value, tuple)
    caller, result = value
    _require_scope(caller, None)
    await _note_use(caller)
    return caller, result


def _refuse_suspended(caller: Caller) -> None:
    if caller.suspended:
        raise Problem(
            status=403,
            kind="tenant-suspended",
            title="The tenant is suspended",
            detail=f"the tenant {caller.tenant_id} is suspended by the operator: its keys are"
            " refused and its schedules deliver nothing until it is resumed",
        )


def _require_scope(caller: Caller, write: bool | None) -> None:
    if write is None:
        write = request.method not in ("GET", "HEAD")
    if write and caller.scope is not Scope.WRITE:
        raise Problem(
            status=403,
            kind="forbidden",
            title="This key may only read",
            detail=f"{caller.key_id} is a read key; this request changes data and needs"
            " a write key",
        )


async def _note_use(caller: Caller) -> None:
    ctx = context()
    now = ctx.clock.now_ms()
    if needs_last_used(caller, now=now):
        await ctx.db.write(touch_api_key, key_id=caller.key_id, now=now)


def still_authorised() -> Callable[[], Awaitable[bool]]:
    """Whether this request's key still authorises it (not revoked, its tenant not
    suspended), asked again later: for an open stream (store.event_hub.Recheck)."""
    token, db = _token(), context().db

    async def ask() -> bool:
        caller = await db.read(caller_for_api_key, api_key=token)
        return caller is not None and not caller.suspended

    return ask


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
