"""Request and response bodies: JSON in, JSON out, with the API's error rules.

- A JSON request body needs ``Content-Type: application/json`` (or ``+json``) → else 415.
- Bytes that :func:`appliance.core.json_text.decode_json_bytes` refuses (not UTF-8, not
  JSON, NaN/Infinity, a number too large, nesting deeper than ``MAX_DEPTH``, unpaired
  surrogates) → 400: they are not input we can even validate. The depth cap keeps every
  later ``json`` call far from Python's recursion limit. Validation of well-formed JSON is
  the views' job (→ 422).
- Responses are written with ``ensure_ascii=False`` and without key sorting, so a tenant's
  ``payload`` comes back as it was given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from quart import Response, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from appliance.api.problems import Problem, bad_request
from appliance.core.json_text import JsonTextError, decode_json_bytes

JSON = "application/json"
MERGE_PATCH_JSON = "application/merge-patch+json"


async def read_json(*, accept: tuple[str, ...] = (JSON,)) -> object:
    """The request's JSON value; raises a 415 or 400 Problem."""
    media_type = (request.mimetype or "").lower()
    if media_type not in accept and not (JSON in accept and media_type.endswith("+json")):
        raise Problem(
            status=415,
            kind="unsupported-media-type",
            title="Unsupported media type",
            detail=f"send the body as {' or '.join(accept)} (got {media_type or 'none'})",
            headers={"Accept-Patch": MERGE_PATCH_JSON} if MERGE_PATCH_JSON in accept else {},
        )
    data = await request.get_data(cache=True, as_text=False, parse_form_data=False)
    return decode_json(data)


def decode_json(data: bytes) -> object:
    try:
        return decode_json_bytes(data)
    except JsonTextError as error:
        raise bad_request(f"the body is not valid JSON: {error.message}") from None


def json_response(
    document: object, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        json.dumps(document, ensure_ascii=False, separators=(",", ":")),
        status=status,
        headers=dict(headers or {}),
        content_type=JSON,
    )


async def drain_request_body(response: Response) -> Response:
    """An ``after_request`` hook: read what the view left unread of the request's body
    before the answer goes out (a 401, 404 or 405 answers before the view reads it).

    hypercorn answers such an early response and keeps the connection, but then misses
    the next request on it if that request's body comes in a later packet: the client
    waits for an answer that never comes (found by schemathesis;
    tests/e2e/test_http_framing.py). Draining first leaves the connection clean. A body
    over the request limit is not read: that answer closes the connection instead.
    """
    has_body = (
        request.content_length or "chunked" in request.headers.get("Transfer-Encoding", "").lower()
    )
    if not has_body:
        return response
    limit = request.max_content_length or current_app.config["MAX_CONTENT_LENGTH"]
    if request.content_length is not None and request.content_length > limit:
        response.headers["Connection"] = "close"
        return response
    try:
        await request.get_data(cache=True, as_text=False, parse_form_data=False)
    except RequestEntityTooLarge:
        response.headers["Connection"] = "close"
    return response
