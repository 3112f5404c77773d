"""Tenant schedule JSON in, :class:`ScheduleSpec` out: parsing, validation and merge-patch.

Rules this module guards (docs/architecture.md, ADR 0032, ADR 0037):

- Validation reports *every* problem at once, each as a :class:`FieldError` with a dotted
  field name (``catchup.policy``, ``headers.Host``) and a message that says how to fix it;
  the fields are read by :class:`~appliance.core.json_fields.FieldReader`, as a preview's.
- Unknown fields are refused, never ignored: a typo (``jitter``) must not silently leave the
  default in place. Response-only fields (``id``, ``version`` …) are refused as read-only.
- ``key`` is optional: the tenant's stable name for the schedule (what ``steeple apply``
  matches by), :data:`KEY_PATTERN`; unique among the tenant's live schedules, which the
  store checks (:mod:`appliance.store.schedule_keys`), not this pure reader.
- ``null`` means "absent" at every level (RFC 7396): the field takes its default, or is
  reported missing if it is required. A literal JSON ``null`` payload therefore cannot be
  stored; send a body or a non-null payload.
- The request fields (``target_url``, the body, ``content_type``, ``headers``) are read by
  :mod:`appliance.core.request_input`, the timing (exactly one of ``cron``, ``at``,
  ``every``; ``timezone``; ``start_at`` and ``end_at``) by :mod:`appliance.core.timing_input`,
  the retry policy by :mod:`appliance.core.retry_input`. Name
  resolution is not done here (core is pure): the API checks the resolved addresses after.

:func:`merge_patch` applies a JSON merge patch to a stored spec's document and revalidates
the result as a whole, so a PATCH can never produce a schedule a POST would refuse; a
header sent back masked keeps its stored value (:func:`appliance.core.secret_headers.keep_masked`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Final, TypeVar

from appliance.core.addresses import AddressPolicy
from appliance.core.json_fields import FieldReader
from appliance.core.request_input import (
    MAX_BODY_BYTES,
    body_field,
    drop_bodiless_content_type,
    read_headers,
    read_request_body,
    read_target_url,
    switch_body_kind,
)
from appliance.core.retry_input import merge_retry, read_retry, retry_document
from appliance.core.schedules import (
    DEFAULT_CATCHUP_POLICY,
    DEFAULT_CATCHUP_WINDOW_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    CatchupPolicy,
    Overlap,
    ScheduleSpec,
)
from appliance.core.timing_input import (
    TIMING_FIELDS,
    read_timing,
    switch_kind,
    timing_document,
)
from appliance.errors import ValidationError

E = TypeVar("E", bound=enum.StrEnum)

MAX_NAME_CHARS: Final = 200
MAX_JITTER_SECONDS: Final = 3600
MAX_CATCHUP_WINDOW_SECONDS: Final = 7 * 24 * 3600
MAX_TIMEOUT_SECONDS: Final = 300
# A key: what a team names a schedule in its git-kept file (``steeple apply``).
KEY_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_KEY_CHARS: Final = 64

FIELDS: Final = (
    "name",
    "key",
    *TIMING_FIELDS,
    "target_url",
    "method",
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
    key = read_key(fields)
    timing = read_timing(fields)
    target_url = read_target_url(fields, policy)
    request = read_request_body(fields, max_body_bytes)
    headers = read_headers(fields, stored_headers)
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
        payload_kind=request.kind,
        body=request.data,
        content_type=request.content_type,
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
        templated=request.templated,
        dst_gap=timing.dst_gap,
        dst_fold=timing.dst_fold,
        key=key,
        method=request.method,
    )


# What one item of a batch usually has of its own; the rest repeats across the batch.
OWN_FIELDS: Final = ("name", "key", "payload", "body", "payload_template")


def parse_like(
    obj: Mapping[str, object], like: ScheduleSpec, *, max_body_bytes: int = MAX_BODY_BYTES
) -> ScheduleSpec:
    """``parse_schedule(obj)`` when every field of ``obj`` but :data:`OWN_FIELDS` is (as JSON)
    the same as in the object ``like`` was parsed from: only the name and the body are
    read, the rest is ``like``'s. The same spec, and the same problems in the same order
    (``like``'s fields had none)."""
    fields = FieldReader(obj)
    name = _name(fields)
    key = read_key(fields)
    request = read_request_body(fields, max_body_bytes)
    if fields.errors:
        raise ValidationError(fields.errors)
    # dataclasses.replace, without its per-field checks (CPU of every batch item: bench/HISTORY.md,
    # "Creating schedules, second pass")
    fields_of_like = dict(zip(_SPEC_FIELDS, _spec_fields(like), strict=True))
    return ScheduleSpec(
        **{
            **fields_of_like,
            "name": name,
            "key": key,
            "payload_kind": request.kind,
            "body": request.data,
            "content_type": request.content_type,
            "templated": request.templated,
        }
    )


_SPEC_FIELDS: Final = tuple(ScheduleSpec.__dataclass_fields__)
_spec_fields: Final = attrgetter(*_SPEC_FIELDS)


def _name(fields: FieldReader) -> str:
    name = fields.text("name", default=None, max_chars=MAX_NAME_CHARS, example="nightly report")
    if fields.ok("name") and fields.obj.get("name") is not None and not name.strip():
        fields.fail("name", "must not be blank")
    return name


def read_key(fields: FieldReader) -> str | None:
    """The optional ``key``: None when absent or null."""
    value = fields.obj.get("key")
    if value is None:
        return None
    if isinstance(value, str) and KEY_PATTERN.fullmatch(value):
        return value
    fields.fail(
        "key",
        f"must be 1-{MAX_KEY_CHARS} lower-case letters, digits, '-', '_' or '.', starting with"
        ' a letter or digit, such as "nightly-report"',
    )
    return None


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
    document: dict[str, object] = {"name": spec.name, "key": spec.key}
    document.update(timing_document(spec))
    document["target_url"] = spec.target_url
    document["method"] = spec.method.value
    body = body_field(spec)
    if body is not None:
        document[body[0]] = body[1]
    document["content_type"] = spec.content_type or None  # None: a bodiless method's
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
    switch_body_kind(document, obj)
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
    drop_bodiless_content_type(document, obj)
    return parse_schedule(
        document, policy=policy, max_body_bytes=max_body_bytes, stored_headers=current.headers
    )


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
