"""Tenant schedule JSON in, :class:`ScheduleSpec` out: parsing, validation and merge-patch.

Rules this module guards (docs/architecture.md, ADR 0032, ADR 0037):

- Validation reports *every* problem at once, each as a :class:`FieldError` with a dotted
  field name (``catchup.policy``, ``headers.Host``) and a message that says how to fix it;
  the fields are read by :class:`~appliance.core.json_fields.FieldReader`, as a preview's.
- Unknown fields are refused, never ignored: a typo (``jitter``) must not silently leave the
  default in place. Response-only fields (``id``, ``version`` …) are refused as read-only.
- ``null`` means "absent" at every level (RFC 7396): the field takes its default, or is
  reported missing if it is required. A literal JSON ``null`` payload therefore cannot be
  stored; send a body or a non-null payload.
- Exactly one of ``payload`` (any JSON value, stored as compact UTF-8 JSON), ``body`` (a
  string, stored as its UTF-8 bytes) or ``payload_template`` (a JSON value stored like a
  payload, whose ``{{name}}`` variables :mod:`appliance.core.payload_template` checks here
  and renders per run) is given. The stored bytes are what every attempt sends (a
  template's rendering of them), so the size limit applies to them, not to the request
  that carried them.
- The timing (exactly one of ``cron``, ``at``, ``every``; ``timezone``; ``start_at`` and
  ``end_at``) is read by :mod:`appliance.core.timing_input`, tenant headers by
  :func:`appliance.core.delivery.check_tenant_headers`, the target URL's static rules by
  :func:`appliance.core.addresses.check_target_url` under the caller's policy. Name
  resolution is not done here (core is pure): the API checks the resolved addresses after.

:func:`merge_patch` applies a JSON merge patch to a stored spec's document and revalidates
the result as a whole, so a PATCH can never produce a schedule a POST would refuse; a
header sent back masked keeps its stored value (:func:`appliance.core.secret_headers.keep_masked`).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Final, TypeVar

from appliance.core.addresses import AddressPolicy, check_target_url
from appliance.core.delivery import check_tenant_headers
from appliance.core.json_fields import FieldReader
from appliance.core.payload_template import template_problems
from appliance.core.retry_input import merge_retry, read_retry, retry_document
from appliance.core.schedules import (
    DEFAULT_CATCHUP_POLICY,
    DEFAULT_CATCHUP_WINDOW_SECONDS,
    DEFAULT_CONTENT_TYPE,
    DEFAULT_TIMEOUT_SECONDS,
    CatchupPolicy,
    Overlap,
    PayloadKind,
    ScheduleSpec,
)
from appliance.core.secret_headers import keep_masked
from appliance.core.timing_input import (
    TIMING_FIELDS,
    read_timing,
    switch_kind,
    timing_document,
)
from appliance.errors import ValidationError

E = TypeVar("E", bound=enum.StrEnum)

MAX_BODY_BYTES: Final = 64 * 1024
MAX_NAME_CHARS: Final = 200
MAX_URL_CHARS: Final = 2048
MAX_CONTENT_TYPE_CHARS: Final = 255
MAX_JITTER_SECONDS: Final = 3600
MAX_CATCHUP_WINDOW_SECONDS: Final = 7 * 24 * 3600
MAX_TIMEOUT_SECONDS: Final = 300

FIELDS: Final = (
    "name",
    *TIMING_FIELDS,
    "target_url",
    "payload",
    "body",
    "payload_template",
    "content_type",
    "headers",
    "jitter_seconds",
    "catchup",
    "retry",
    "timeout_seconds",
    "paused",
    "overlap",
)
READ_ONLY_FIELDS: Final = frozenset(
    {"id", "version", "created_at", "updated_at", "next_runs", "status"}
)
_CATCHUP_FIELDS: Final = ("policy", "window_seconds")

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
# type "/" subtype *( OWS ";" OWS parameter ), RFC 9110 §8.3.1.
_MEDIA_TYPE = re.compile(
    rf'{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|"[\x20\x21\x23-\x5b\x5d-\x7e]*"))*'
)


def parse_schedule(
    obj: object,
    *,
    policy: AddressPolicy,
    max_body_bytes: int = MAX_BODY_BYTES,
    stored_headers: Sequence[tuple[str, str]] = (),
) -> ScheduleSpec:
    """The spec described by tenant JSON ``obj``; raises ValidationError listing every
    problem. ``stored_headers``: an edited schedule's, which masked values keep."""
    if not isinstance(obj, dict):
        raise ValidationError.single("$", "the request body must be a JSON object")
    fields = FieldReader(obj)
    fields.unknown(FIELDS, read_only=READ_ONLY_FIELDS)
    name = _name(fields)
    timing = read_timing(fields)
    target_url = _target_url(fields, policy)
    kind, body, content_type, templated = _body(fields, max_body_bytes)
    headers = _headers(fields, stored_headers)
    jitter = fields.integer(
        "jitter_seconds", default=0, low=0, high=MAX_JITTER_SECONDS, unit="seconds"
    )
    catchup_policy, window = _catchup(fields.nested("catchup"))
    retry = read_retry(fields.nested("retry"))
    timeout = fields.integer(
        "timeout_seconds",
        default=DEFAULT_TIMEOUT_SECONDS,
        low=1,
        high=MAX_TIMEOUT_SECONDS,
        unit="seconds",
    )
    paused = fields.boolean("paused", default=False)
    overlap = _choice(fields, "overlap", Overlap, Overlap.ALLOW)
    if fields.errors:
        raise ValidationError(fields.errors)
    return ScheduleSpec(
        name=name,
        cron=timing.cron,
        timezone=timing.timezone,
        target_url=target_url,
        payload_kind=kind,
        body=body,
        content_type=content_type,
        headers=headers,
        jitter_seconds=jitter,
        catchup_policy=catchup_policy,
        catchup_window_seconds=window,
        retry=retry,
        timeout_seconds=timeout,
        paused=paused,
        at=timing.at,
        every_seconds=timing.every_seconds,
        start_at=timing.start_at,
        end_at=timing.end_at,
        overlap=overlap,
        templated=templated,
        dst_gap=timing.dst_gap,
        dst_fold=timing.dst_fold,
    )


# What one item of a batch usually has of its own; the rest repeats across the batch.
OWN_FIELDS: Final = ("name", "payload", "body", "payload_template")


def parse_like(
    obj: Mapping[str, object], like: ScheduleSpec, *, max_body_bytes: int = MAX_BODY_BYTES
) -> ScheduleSpec:
    """``parse_schedule(obj)`` when every field of ``obj`` but :data:`OWN_FIELDS` is (as JSON)
    the same as in the object ``like`` was parsed from: only the name and the body are
    read, the rest is ``like``'s. The same spec, and the same problems in the same order
    (``like``'s fields had none)."""
    fields = FieldReader(obj)
    name = _name(fields)
    kind, body, content_type, templated = _body(fields, max_body_bytes)
    if fields.errors:
        raise ValidationError(fields.errors)
    # dataclasses.replace, without its per-field checks (CPU of every batch item: bench/HISTORY.md,
    # "Creating schedules, second pass")
    fields_of_like = dict(zip(_SPEC_FIELDS, _spec_fields(like), strict=True))
    return ScheduleSpec(
        **{
            **fields_of_like,
            "name": name,
            "payload_kind": kind,
            "body": body,
            "content_type": content_type,
            "templated": templated,
        }
    )


_SPEC_FIELDS: Final = tuple(ScheduleSpec.__dataclass_fields__)
_spec_fields: Final = attrgetter(*_SPEC_FIELDS)


def _name(fields: FieldReader) -> str:
    name = fields.text("name", default=None, max_chars=MAX_NAME_CHARS, example="nightly report")
    if fields.ok("name") and fields.obj.get("name") is not None and not name.strip():
        fields.fail("name", "must not be blank")
    return name


def _target_url(fields: FieldReader, policy: AddressPolicy) -> str:
    url = fields.text(
        "target_url", default=None, max_chars=MAX_URL_CHARS, example="https://example.com/hook"
    )
    if url and fields.ok("target_url"):
        try:
            check_target_url(url, policy)
        except ValidationError as error:
            fields.absorb(error)
    return url


_BODY_FIELDS: Final = ("payload", "body", "payload_template")
_BODY_HINT: Final = (
    "payload (any JSON value, sent as compact JSON), body (a string, sent verbatim) or"
    " payload_template (JSON with {{scheduled_for}}-style variables, rendered per run)"
)


def _body(fields: FieldReader, max_body_bytes: int) -> tuple[PayloadKind, bytes, str, bool]:
    """The payload kind, the exact bytes every attempt sends (a template's, rendered per
    run), their content type, and whether they are a template."""
    content_type = fields.text(
        "content_type",
        default=DEFAULT_CONTENT_TYPE,
        max_chars=MAX_CONTENT_TYPE_CHARS,
        example="text/plain; charset=utf-8",
    )
    well_formed = _MEDIA_TYPE.fullmatch(content_type)
    if fields.given("content_type") and fields.ok("content_type") and not well_formed:
        fields.fail("content_type", 'must be a media type such as "text/plain; charset=utf-8"')
    given = [key for key in _BODY_FIELDS if fields.given(key)]
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


def _headers(fields: FieldReader, stored: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    try:
        return keep_masked(check_tenant_headers(fields.obj.get("headers")), stored)
    except ValidationError as error:
        fields.absorb(error)
        return ()


def _choice(fields: FieldReader, key: str, choices: type[E], default: E) -> E:
    value = fields.obj.get(key)
    if isinstance(value, str) and value in {c.value for c in choices}:
        return choices(value)
    if value is not None:
        fields.fail(key, f"must be one of {', '.join(c.value for c in choices)}")
    return default


def _catchup(fields: FieldReader) -> tuple[CatchupPolicy, int]:
    fields.unknown(_CATCHUP_FIELDS)
    policy = _choice(fields, "policy", CatchupPolicy, DEFAULT_CATCHUP_POLICY)
    window = fields.integer(
        "window_seconds",
        default=DEFAULT_CATCHUP_WINDOW_SECONDS,
        low=0,
        high=MAX_CATCHUP_WINDOW_SECONDS,
        unit="seconds",
    )
    return policy, window


def schedule_document(spec: ScheduleSpec) -> dict[str, object]:
    """The tenant-facing JSON of ``spec``: what a POST with these values would contain.

    ``payload`` is echoed as parsed JSON, ``body`` as the exact string given."""
    document: dict[str, object] = {"name": spec.name, **timing_document(spec)}
    document["target_url"] = spec.target_url
    key, value = body_field(spec)
    document[key] = value
    document["content_type"] = spec.content_type
    document["headers"] = dict(spec.headers)
    document["jitter_seconds"] = spec.jitter_seconds
    document["catchup"] = {
        "policy": spec.catchup_policy.value,
        "window_seconds": spec.catchup_window_seconds,
    }
    document["retry"] = retry_document(spec.retry)
    document["timeout_seconds"] = spec.timeout_seconds
    document["paused"] = spec.paused
    document["overlap"] = spec.overlap.value
    return document


def body_field(spec: ScheduleSpec) -> tuple[str, object]:
    """The field that echoes ``spec``'s body in its document, and its value."""
    if spec.payload_kind is PayloadKind.JSON:
        return "payload_template" if spec.templated else "payload", json.loads(spec.body)
    return "body", spec.body.decode("utf-8")


def merge_patch(
    current: ScheduleSpec,
    obj: object,
    *,
    policy: AddressPolicy,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> ScheduleSpec:
    """``current`` with the JSON merge patch ``obj`` applied, validated as a whole.

    Top-level fields are replaced; ``catchup`` and ``dst`` are merged key by key, ``retry``
    too (:func:`~appliance.core.retry_input.merge_retry`: one status list replaces the other); a
    patch naming a kind (``cron``, ``at``, ``every``) replaces the stored kind;
    ``payload`` is replaced whole (it is the tenant's opaque value, not ours to merge);
    ``null`` removes a field so it takes its default. Giving one of ``payload``, ``body``
    and ``payload_template`` drops the stored other; between ``body`` and a JSON kind it
    also resets ``content_type`` to its default unless the patch sets it too: a content
    type chosen for text rarely fits JSON."""
    if not isinstance(obj, dict):
        raise ValidationError.single("$", "a merge patch must be a JSON object")
    document = schedule_document(current)
    _switch_body_kind(document, obj)
    switch_kind(document, obj)
    for key, value in obj.items():
        if key == "retry" and isinstance(value, dict):
            document[key] = merge_retry(document.get(key), value)
        elif key in ("catchup", "dst") and isinstance(value, dict):
            document[key] = _merge_object(document.get(key), value)
        elif value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return parse_schedule(
        document, policy=policy, max_body_bytes=max_body_bytes, stored_headers=current.headers
    )


def _switch_body_kind(document: dict[str, object], patch: Mapping[str, object]) -> None:
    given = [key for key in _BODY_FIELDS if patch.get(key) is not None]
    if len(given) != 1:
        return  # none given: nothing to switch; several: refused by parse_schedule
    for other in _BODY_FIELDS:
        if other != given[0] and other in document and patch.get(other) is None:
            del document[other]
            if "content_type" not in patch and (given[0] == "body") != (other == "body"):
                document.pop("content_type", None)


def _merge_object(target: object, patch: Mapping[str, object]) -> dict[str, object]:
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def changed_fields(before: ScheduleSpec, after: ScheduleSpec) -> list[str]:
    """The names of the API fields (as :func:`schedule_document` draws them) whose value
    differs between two specs, in document order: what ``schedule.updated`` lists."""
    old, new = schedule_document(before), schedule_document(after)
    names = [*new, *(name for name in old if name not in new)]
    return [name for name in names if old.get(name) != new.get(name)]
