"""RFC 9457 problem details: every error the API answers is ``application/problem+json``.

Rules this module guards (docs/architecture.md, "The API"):

- One translation point from exceptions to responses, registered on the app by
  :func:`register_problem_handlers`: ``ValidationError`` → 422 with one ``errors`` entry per
  field (a batch item's with its ``index``), ``NotFound`` → 404, ``VersionMismatch`` → 412,
  ``RequestKeyReused`` → 422, ``ScheduleLimitReached`` → 409 ``schedule-limit``,
  ``KeyTaken`` → 409 ``key-taken`` naming the ``key`` (and a batch item's ``index``),
  ``Conflict`` → 409, ``StreamLimitReached`` → 429 ``stream-limit`` with ``Retry-After``
  and the ``limit`` it hit, werkzeug's HTTP
  errors (unknown route 404, 405 with ``Allow``, 413) keep their status, ``StoreError`` →
  503 (disk full, I/O: the operator's problem, logged), and :class:`Problem` carries
  anything a view decides itself (400, 401, 415). Anything else is a bug: logged with its
  traceback, answered as a bare 500 that leaks nothing.
- ``type`` is a stable URN per problem kind, so clients can branch on it; ``title`` is the
  kind's summary, ``detail`` this occurrence's explanation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from quart import Response, current_app, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, MethodNotAllowed, RequestEntityTooLarge

from appliance.errors import Conflict, FieldError, NotFound, StoreError, ValidationError
from appliance.live.limits import RETRY_AFTER_S, StreamLimitReached
from appliance.store.request_keys import RequestKeyReused
from appliance.store.schedule_keys import KeyTaken
from appliance.store.schedules import ScheduleLimitReached, VersionMismatch

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
_URN = "urn:steeple:problem:"


class Problem(Exception):
    """An error response a view decides on itself (raise it). Not a frozen dataclass:
    exceptions get ``__traceback__`` and ``__context__`` assigned while they travel."""

    def __init__(
        self,
        *,
        status: int,
        kind: str,
        title: str,
        detail: str,
        errors: Sequence[FieldError] = (),
        headers: Mapping[str, str] | None = None,
        extensions: Mapping[str, str | int] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind  # the last part of the type URN, e.g. "unauthorized"
        self.title = title
        self.detail = detail
        self.errors = tuple(errors)
        self.headers = dict(headers or {})
        self.extensions = dict(extensions or {})  # RFC 9457 extension members


def problem_response(problem: Problem) -> Response:
    document: dict[str, object] = {
        "type": _URN + problem.kind,
        "title": problem.title,
        "status": problem.status,
        "detail": problem.detail,
        **problem.extensions,
    }
    if problem.errors:
        document["errors"] = [_field_error(e) for e in problem.errors]
    return Response(
        json.dumps(document, ensure_ascii=False),
        status=problem.status,
        headers=dict(problem.headers),
        content_type=PROBLEM_JSON,
    )


def _field_error(error: FieldError) -> dict[str, object]:
    document: dict[str, object] = {"field": error.field, "message": error.message}
    if error.index is not None:  # an item of a batch (api/schedule_batch.py)
        document["index"] = error.index
    return document


def invalid(errors: Sequence[FieldError]) -> Problem:
    """The 422 for tenant input that does not validate."""
    count = len(errors)
    fields = ", ".join(
        dict.fromkeys(e.field if e.index is None else f"[{e.index}].{e.field}" for e in errors)
    )
    return Problem(
        status=422,
        kind="validation",
        title="The request is not valid",
        detail=f"{count} problem{'s' if count != 1 else ''} with: {fields}",
        errors=tuple(errors),
    )


def bad_request(detail: str) -> Problem:
    return Problem(status=400, kind="malformed-request", title="Malformed request", detail=detail)


def _from_validation(error: ValidationError) -> Response:
    return problem_response(invalid(error.errors))


def _from_not_found(error: NotFound) -> Response:
    return problem_response(
        Problem(status=404, kind="not-found", title="Not found", detail=str(error))
    )


def _from_conflict(error: Conflict) -> Response:
    if isinstance(error, VersionMismatch):
        problem = Problem(
            status=412,
            kind="precondition-failed",
            title="The resource has changed",
            detail=f"{error}; GET it again and retry with its current ETag in If-Match",
        )
    elif isinstance(error, RequestKeyReused):
        problem = Problem(
            status=422,
            kind="idempotency-key-reused",
            title="Idempotency-Key reused with a different request",
            detail=f"{error}; use a new key for a new request",
            errors=(FieldError(field="Idempotency-Key", message=str(error)),),
        )
    elif isinstance(error, ScheduleLimitReached):
        problem = Problem(
            status=409,
            kind="schedule-limit",
            title="Schedule limit reached",
            detail=str(error),
        )
    elif isinstance(error, KeyTaken):
        problem = Problem(
            status=409,
            kind="key-taken",
            title="Key taken",
            detail=str(error),
            errors=(FieldError(field="key", message=str(error), index=error.index),),
            extensions={"key": error.key},
        )
    else:
        problem = Problem(status=409, kind="conflict", title="Conflict", detail=str(error))
    return problem_response(problem)


def _from_stream_limit(error: StreamLimitReached) -> Response:
    return problem_response(
        Problem(
            status=429,
            kind="stream-limit",
            title="Too many open streams",
            detail=str(error),
            headers={"Retry-After": str(RETRY_AFTER_S)},
            extensions={"limit": str(error.limit), "max": error.most},
        )
    )


def _from_http(error: HTTPException) -> Response:
    status = error.code or 500
    headers = {}
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        headers["Allow"] = ", ".join(error.valid_methods)
    kind = (error.name or "error").lower().replace(" ", "-")
    detail = error.description or error.name or ""
    if isinstance(error, RequestEntityTooLarge):
        limit = request.max_content_length or current_app.config["MAX_CONTENT_LENGTH"]
        detail = f"the request body is larger than the limit of {limit // 1024} KiB"
    return problem_response(
        Problem(
            status=status, kind=kind, title=error.name or "Error", detail=detail, headers=headers
        )
    )


def _from_store(error: StoreError) -> Response:
    log.error("database error answering a request: %s", error)
    return problem_response(
        Problem(
            status=503,
            kind="unavailable",
            title="Storage unavailable",
            detail="the appliance could not use its database; retry shortly",
            headers={"Retry-After": "5"},
        )
    )


def _from_unexpected(error: Exception) -> Response:
    log.error("unhandled error answering a request", exc_info=error)
    return problem_response(
        Problem(
            status=500,
            kind="internal",
            title="Internal error",
            detail="the appliance failed to answer; the operator's log has the details",
        )
    )


def register_problem_handlers(app: QuartTrio) -> None:
    app.register_error_handler(Problem, problem_response)
    app.register_error_handler(ValidationError, _from_validation)
    app.register_error_handler(NotFound, _from_not_found)
    app.register_error_handler(Conflict, _from_conflict)
    app.register_error_handler(StoreError, _from_store)
    app.register_error_handler(StreamLimitReached, _from_stream_limit)
    app.register_error_handler(HTTPException, _from_http)
    app.register_error_handler(Exception, _from_unexpected)
