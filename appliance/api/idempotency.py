"""The ``Idempotency-Key`` of a create request — the *request key* of docs/architecture.md's
glossary — for ``POST /v1/schedules``, ``/v1/schedules/batch`` and ``/v1/schedules/apply``:
the header read and checked, the body's hash, and the answer a first request left.

A retry with the same key and the same body (by hash) is answered as the first request
was, even if the body would no longer pass (say, its host stopped resolving); the store
(``store.request_keys``) refuses the same key with another body.
"""

from __future__ import annotations

import hashlib
import json

from quart import Response, request

from appliance.api.context import ApiContext
from appliance.errors import ValidationError
from appliance.store import request_keys
from appliance.store.request_keys import StoredResponse

MAX_REQUEST_KEY_CHARS = 255


def request_key_header() -> str | None:
    """The request's ``Idempotency-Key``, or None; 422 when it is not 1–255 printable
    characters."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_REQUEST_KEY_CHARS or not key.isprintable():
        raise ValidationError.single(
            "Idempotency-Key",
            f"must be 1 to {MAX_REQUEST_KEY_CHARS} printable characters, e.g. a UUID",
        )
    return key


def request_hash(obj: object) -> str:
    """The body's hash: canonical JSON (sorted keys, no spaces), SHA-256."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


async def recalled(
    ctx: ApiContext, *, tenant_id: str, request_key: str | None, obj: object
) -> StoredResponse | None:
    """The answer a first request with ``request_key`` and this body left (a read), or
    None: no key, or none remembered."""
    if request_key is None:
        return None
    return await ctx.db.read(
        request_keys.recall_request,
        tenant_id=tenant_id,
        request_key=request_key,
        request_hash=request_hash(obj),
        now=ctx.clock.now_ms(),
    )


def stored_json(response: StoredResponse, *, replayed: bool) -> Response:
    """A remembered (or just stored) JSON answer as it was, marked when replayed."""
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    return Response(
        response.body, status=response.status, headers=headers, content_type="application/json"
    )
