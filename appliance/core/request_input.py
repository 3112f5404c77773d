"""The request fields of tenant schedule JSON: ``target_url``, ``method``, ``payload`` /
``body`` / ``payload_template``, ``content_type`` and ``headers`` — what every delivery
sends, read for :mod:`appliance.core.schedule_input` (which reads the rest and owns the
rules of the document as a whole).

Rules this module guards (ADR 0032, ADR 0034):

- Exactly one of ``payload`` (any JSON value, stored as compact UTF-8 JSON), ``body`` (a
  string, stored as its UTF-8 bytes) or ``payload_template`` (a JSON value stored like a
  payload, whose ``{{name}}`` variables :mod:`appliance.core.payload_template` checks here
  and renders per run) is given. The stored bytes are what every attempt sends (a
  template's rendering of them), so the size limit applies to them, not to the request
  that carried them.
- ``method`` is one of :class:`~appliance.core.schedules.Method` (``POST`` by default).
  ``GET`` and ``DELETE`` carry no body: none of the body fields nor ``content_type`` may
  be given with them (each such problem names the field *and* ``method``), and their spec
  holds the empty body and content type. A body method without a body is refused as
  before.
- Tenant headers are checked by :func:`appliance.core.delivery.check_tenant_headers`, a
  header sent back masked keeps its stored value
  (:func:`appliance.core.secret_headers.keep_masked`); the target URL's static rules are
  :func:`appliance.core.addresses.check_target_url` under the caller's policy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from appliance.core.addresses import AddressPolicy, check_target_url
from appliance.core.delivery import check_tenant_headers
from appliance.core.json_fields import FieldReader
from appliance.core.payload_template import template_problems
from appliance.core.schedules import (
    BODILESS_METHODS,
    DEFAULT_CONTENT_TYPE,
    Method,
    PayloadKind,
    ScheduleSpec,
)
from appliance.core.secret_headers import keep_masked
from appliance.errors import ValidationError

MAX_BODY_BYTES: Final = 64 * 1024
MAX_URL_CHARS: Final = 2048
MAX_CONTENT_TYPE_CHARS: Final = 255

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
# type "/" subtype *( OWS ";" OWS parameter ), RFC 9110 §8.3.1.
_MEDIA_TYPE = re.compile(
    rf'{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|"[\x20\x21\x23-\x5b\x5d-\x7e]*"))*'
)


def read_target_url(fields: FieldReader, policy: AddressPolicy) -> str:
    url = fields.text(
        "target_url", default=None, max_chars=MAX_URL_CHARS, example="https://example.com/hook"
    )
    if url and fields.ok("target_url"):
        try:
            check_target_url(url, policy)
        except ValidationError as error:
            fields.absorb(error)
    return url


BODY_FIELDS: Final = ("payload", "body", "payload_template")
_BODY_HINT: Final = (
    "payload (any JSON value, sent as compact JSON), body (a string, sent verbatim) or"
    " payload_template (JSON with {{scheduled_for}}-style variables, rendered per run)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestBody:
    """What a schedule's deliveries carry: their method, the payload kind, the exact bytes
    every attempt sends (a template's, rendered per run), their content type, and whether
    they are a template."""

    method: Method
    kind: PayloadKind
    data: bytes
    content_type: str
    templated: bool


_METHODS: Final = ", ".join(m.value for m in Method)


def read_request_body(fields: FieldReader, max_body_bytes: int) -> RequestBody:
    """``method`` and the body fields (see the module rules)."""
    method = _method(fields)
    if method.carries_body:
        kind, data, content_type, templated = _read_body(fields, max_body_bytes)
        return RequestBody(
            method=method, kind=kind, data=data, content_type=content_type, templated=templated
        )
    for key in (*BODY_FIELDS, "content_type"):
        if fields.given(key):
            fields.fail(key, f"cannot be given with method {method}: a {method} carries no body")
            fields.fail(
                "method",
                f"{method} carries no body, but {key} is given: drop {key} (a patch sends"
                f' "{key}": null) or use POST, PUT or PATCH',
            )
    return RequestBody(
        method=method, kind=PayloadKind.JSON, data=b"", content_type="", templated=False
    )


def _method(fields: FieldReader) -> Method:
    value = fields.obj.get("method")
    if value is None:
        return Method.POST
    if isinstance(value, str) and value in Method.__members__:
        return Method(value)
    fields.fail("method", f"must be one of {_METHODS} (upper case)")
    return Method.POST


def _read_body(fields: FieldReader, max_body_bytes: int) -> tuple[PayloadKind, bytes, str, bool]:
    content_type = fields.text(
        "content_type",
        default=DEFAULT_CONTENT_TYPE,
        max_chars=MAX_CONTENT_TYPE_CHARS,
        example="text/plain; charset=utf-8",
    )
    well_formed = _MEDIA_TYPE.fullmatch(content_type)
    if fields.given("content_type") and fields.ok("content_type") and not well_formed:
        fields.fail("content_type", 'must be a media type such as "text/plain; charset=utf-8"')
    given = [key for key in BODY_FIELDS if fields.given(key)]
    if len(given) > 1:
        fields.fail(given[1], f"{' and '.join(given)} are all given; keep one: {_BODY_HINT}")
        return PayloadKind.JSON, b"", content_type, False
    if not given:
        fields.fail("payload", f"give the request body: {_BODY_HINT}")
        return PayloadKind.JSON, b"", content_type, False
    key = given[0]
    kind = PayloadKind.BODY if key == "body" else PayloadKind.JSON
    data = _encode(fields, key, kind)
    if len(data) > max_body_bytes:
        fields.fail(
            key,
            f"is {len(data)} bytes once encoded; the limit is {max_body_bytes} bytes "
            f"({max_body_bytes // 1024} KiB)",
        )
    templated = key == "payload_template"
    if templated and fields.ok(key):
        for field, message in template_problems(fields.obj[key]):
            fields.fail(field, message)
    return kind, data, content_type, templated


def _encode(fields: FieldReader, key: str, kind: PayloadKind) -> bytes:
    value = fields.obj[key]
    if kind is PayloadKind.BODY and not isinstance(value, str):
        fields.fail("body", "must be a string (use payload for JSON values)")
        return b""
    try:
        text = value if isinstance(value, str) and kind is PayloadKind.BODY else compact(value)
        return text.encode("utf-8")
    except UnicodeEncodeError:
        fields.fail(key, "contains an unpaired UTF-16 surrogate; send valid Unicode text")
    except (ValueError, TypeError):
        fields.fail(key, "must be a JSON value without NaN or Infinity")
    except RecursionError:
        fields.fail(key, "nests too deeply")
    return b""


def compact(value: object) -> str:
    """The compact JSON text a ``payload`` is sent as."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def read_headers(
    fields: FieldReader, stored: Sequence[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """The checked headers, a masked one taking its stored value; every problem absorbed,
    the mask's too when another header is refused (all at once, not one per round)."""
    raw = fields.obj.get("headers")
    try:
        return keep_masked(check_tenant_headers(raw), stored)
    except ValidationError as error:
        fields.absorb(error)
        named = {problem.field for problem in error.errors}
        pairs = raw.items() if isinstance(raw, dict) else ()
        rest = [
            (name, value)
            for name, value in pairs
            if isinstance(value, str) and f"headers.{name}" not in named
        ]
        try:
            keep_masked(rest, stored)
        except ValidationError as masked:
            fields.absorb(masked)
        return ()


def body_field(spec: ScheduleSpec) -> tuple[str, object] | None:
    """The field that echoes ``spec``'s body in its document, and its value; None for a
    bodiless method's."""
    if not spec.method.carries_body:
        return None
    if spec.payload_kind is PayloadKind.JSON:
        return "payload_template" if spec.templated else "payload", json.loads(spec.body)
    return "body", spec.body.decode("utf-8")


def drop_bodiless_content_type(document: dict[str, object], patch: Mapping[str, object]) -> None:
    """After a merge patch is applied to ``document``: with no body left, or a bodiless
    method, the stored content type goes too unless the patch sets it (it is Steeple's
    default or was chosen for the body, not a field of its own): only the body is then
    refused, naming what to drop."""
    method = document.get("method")
    bodiless = isinstance(method, str) and method in BODILESS_METHODS
    no_body = all(document.get(key) is None for key in BODY_FIELDS)
    if "content_type" not in patch and (bodiless or no_body):
        document.pop("content_type", None)


def switch_body_kind(document: dict[str, object], patch: Mapping[str, object]) -> None:
    """Before a merge patch is applied to ``document``: giving one of :data:`BODY_FIELDS`
    drops the stored other; between ``body`` and a JSON kind it also resets
    ``content_type`` unless the patch sets it too (a content type chosen for text rarely
    fits JSON)."""
    given = [key for key in BODY_FIELDS if patch.get(key) is not None]
    if len(given) != 1:
        return  # none given: nothing to switch; several: refused by parse_schedule
    for other in BODY_FIELDS:
        if other != given[0] and other in document and patch.get(other) is None:
            del document[other]
            if "content_type" not in patch and (given[0] == "body") != (other == "body"):
                document.pop("content_type", None)
