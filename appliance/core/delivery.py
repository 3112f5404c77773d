"""The delivery request: what every attempt of a run sends (ADR 0032, ADR 0034).

Rules this module guards:

- ``X-Idempotency-Key`` and ``X-Scheduled-For`` identify the *occurrence*: they come from
  the run row (key) and the canonical, un-jittered ``scheduled_for`` (ADR 0037), so they are
  identical on every attempt, reclaim, replay and replica. Only ``X-Attempt`` and the
  signature (timestamp and value) change between attempts.
- The signature is Standard Webhooks v1 over ``key.timestamp.body``
  (:func:`appliance.core.signing.sign`), made immediately before each attempt; the same
  three values are also sent as ``webhook-id`` / ``webhook-timestamp`` /
  ``webhook-signature`` for off-the-shelf verifiers.
- ``Accept-Encoding: identity``: the response excerpt is read raw, never decompressed.
- The method is the schedule's (:class:`~appliance.core.schedules.Method`). Every header
  above goes with every method, in the same order; a GET or DELETE carries no body and so
  no ``Content-Type`` (whatever body its run holds: one made before a change of method),
  and its signature signs the empty body, ``key.timestamp.`` (Standard Webhooks).
- A delivery Steeple makes on a tenant's request outside the schedule is marked by one
  more header after the contract's (:data:`MARK_HEADERS`): ``X-Steeple-Resend: <run id>``
  on every attempt of a copy made by a resend with a new key, ``X-Steeple-Test: dedupe``
  on both requests of a dedupe test (docs/receiver.md).
- Tenants may add their own headers, but never one Steeple sets or one that controls the
  connection (:data:`RESERVED_HEADERS`, :data:`RESERVED_PREFIXES`, compared
  case-insensitively). :func:`check_tenant_headers` refuses them when a schedule is
  written; :func:`build_request` also drops any that slipped into storage, because the
  contract headers must never carry a tenant's value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from appliance.core.instants import format_scheduled_for
from appliance.core.schedules import Method
from appliance.core.signing import signature_headers
from appliance.errors import FieldError, ValidationError

# Headers every attempt carries; their values are Steeple's, never the tenant's.
CONTRACT_HEADERS = (
    "X-Idempotency-Key",
    "X-Schedule-Id",
    "X-Run-Id",
    "X-Attempt",
    "X-Scheduled-For",
    "X-Signature-Timestamp",
    "X-Signature",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "User-Agent",
    "Content-Type",
    "Accept-Encoding",
)

# Framing and hop-by-hop headers (RFC 9110 §7.6.1): the HTTP client owns them, and a
# tenant value would corrupt the message or the connection rather than reach the receiver.
_CONNECTION_HEADERS = (
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Upgrade",
)

RESERVED_HEADERS: frozenset[str] = frozenset(
    name.lower() for name in CONTRACT_HEADERS + _CONNECTION_HEADERS
)
RESERVED_PREFIXES: tuple[str, ...] = ("x-signature", "x-idempotency", "webhook-", "x-steeple-")

RESEND_HEADER = "X-Steeple-Resend"  # the run a resend copy copies
TEST_HEADER = "X-Steeple-Test"  # "dedupe": a dedupe test's request, no run behind it
MARK_HEADERS = (RESEND_HEADER, TEST_HEADER)

MAX_TENANT_HEADERS = 50
MAX_TENANT_HEADER_BYTES = 8 * 1024  # sum of len(name) + len(value) over all tenant headers

# RFC 7230 §3.2.6 token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Visible ASCII, space and tab only: CR/LF/NUL would split or truncate the message, other
# control bytes are refused by the HTTP client, and non-ASCII cannot be encoded reliably.
_VALUE = re.compile(r"[\t\x20-\x7e]*")

_FIX_RESERVED = "remove it; Steeple sets this header itself on every delivery"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryRequest:
    """One attempt's request: target, headers in sending order, exact body bytes (empty
    for a method that carries none), method."""

    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    method: Method = Method.POST


def is_reserved(name: str) -> bool:
    """Whether a tenant may not set header ``name`` (case-insensitive)."""
    lowered = name.lower()
    return lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_PREFIXES)


def check_tenant_headers(value: object) -> tuple[tuple[str, str], ...]:
    """Validate a schedule's ``headers`` JSON value and return it as ``(name, value)`` pairs.

    Accepted shapes: ``null`` (no headers), an object of string to string
    (``{"Authorization": "Bearer …"}``), or a list of ``[name, value]`` pairs. Names are
    RFC 7230 tokens, unique case-insensitively and not reserved; values are printable ASCII
    without leading or trailing blanks. At most :data:`MAX_TENANT_HEADERS` headers and
    :data:`MAX_TENANT_HEADER_BYTES` bytes of names plus values.

    Raises :class:`ValidationError` listing every problem, with field ``headers`` (shape,
    count, size) or ``headers.<Name>`` (one header).
    """
    pairs = _pairs(value)
    errors: list[FieldError] = []
    seen: set[str] = set()
    for name, header_value in pairs:
        problem = _header_problem(name, header_value, seen)
        if problem is not None:
            errors.append(FieldError(field=f"headers.{name}", message=problem))
        seen.add(name.lower())
    errors.extend(_size_problems(pairs))
    if errors:
        raise ValidationError(errors)
    return pairs


def _pairs(value: object) -> tuple[tuple[str, str], ...]:
    """The ``(name, value)`` pairs of an object or pair list; raises on any other shape."""
    if value is None:
        return ()
    items: list[tuple[object, object]]
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = [_pair(index, item) for index, item in enumerate(value)]
    else:
        raise ValidationError.single(
            "headers",
            'must be an object of header names to string values, e.g. {"X-Team": "billing"}',
        )
    errors = [
        FieldError(
            field=f"headers.{name}",
            message=f"the value must be a string; write it in quotes, e.g. {_quoted(v)}",
        )
        for name, v in items
        if not isinstance(v, str)
    ]
    if errors:
        raise ValidationError(errors)
    return tuple((str(name), str(v)) for name, v in items)


def _pair(index: int, item: object) -> tuple[object, object]:
    if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
        return item[0], item[1]
    raise ValidationError.single(
        "headers",
        f'item {index} must be a [name, value] pair of strings, e.g. ["X-Team", "billing"]',
    )


def _quoted(value: object) -> str:
    return '"' + str(value).replace('"', "") + '"'


def _header_problem(name: str, value: str, seen: set[str]) -> str | None:
    """What is wrong with one tenant header and how to fix it, or None."""
    if not _TOKEN.fullmatch(name):
        return (
            "is not a valid header name; use letters, digits and - only "
            "(no spaces, colons or other punctuation)"
        )
    if is_reserved(name):
        return f"is reserved: {_FIX_RESERVED}"
    if name.lower() in seen:
        return "is given twice (header names are case-insensitive); combine the values in one"
    if not _VALUE.fullmatch(value):
        return (
            "the value contains a line break, NUL, control or non-ASCII character; "
            "use printable ASCII only (percent- or base64-encode other text)"
        )
    if value != value.strip(" \t"):
        return "the value starts or ends with a space or tab; remove it"
    return None


def _size_problems(pairs: Sequence[tuple[str, str]]) -> list[FieldError]:
    problems = []
    if len(pairs) > MAX_TENANT_HEADERS:
        problems.append(
            FieldError(
                field="headers",
                message=f"{len(pairs)} headers given, at most {MAX_TENANT_HEADERS} are "
                "allowed; remove some or move the data into the body",
            )
        )
    size = sum(len(name) + len(value) for name, value in pairs)
    if size > MAX_TENANT_HEADER_BYTES:
        problems.append(
            FieldError(
                field="headers",
                message=f"names and values total {size} bytes, at most "
                f"{MAX_TENANT_HEADER_BYTES} are allowed; move large data into the body",
            )
        )
    return problems


def build_request(
    *,
    target_url: str,
    body: bytes,
    content_type: str,
    tenant_headers: Sequence[tuple[str, str]],
    schedule_id: str,
    run_id: str,
    attempt: int,
    scheduled_for_ms: int,
    idempotency_key: str,
    secrets: Sequence[str],
    signed_at_s: int,
    user_agent: str,
    marks: Sequence[tuple[str, str]] = (),
    method: Method = Method.POST,
) -> DeliveryRequest:
    """The request for attempt ``attempt`` (1-based) of a run, signed at ``signed_at_s``
    (unix seconds) with every active secret, newest first. ``marks``: Steeple's marking
    headers (:data:`MARK_HEADERS`), sent after the contract's.

    Raises ``ValueError`` for an attempt below 1 or a ``scheduled_for_ms`` that is not a
    whole second, and :class:`appliance.core.signing.SignatureError` without secrets."""
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    if not method.carries_body:
        body = b""
    typed = (("Content-Type", content_type),) if method.carries_body else ()
    contract = (
        ("X-Idempotency-Key", idempotency_key),
        ("X-Schedule-Id", schedule_id),
        ("X-Run-Id", run_id),
        ("X-Attempt", str(attempt)),
        ("X-Scheduled-For", format_scheduled_for(scheduled_for_ms)),
        *signature_headers(secrets, idempotency_key, signed_at_s, body),
        ("User-Agent", user_agent),
        *typed,
        ("Accept-Encoding", "identity"),
        *marks,
    )
    extra = tuple((name, value) for name, value in tenant_headers if not is_reserved(name))
    return DeliveryRequest(url=target_url, headers=contract + extra, body=body, method=method)
