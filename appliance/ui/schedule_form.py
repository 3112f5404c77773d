"""The schedule form: its fields to the API's schedule JSON and back, and the API's field
errors onto the form's fields.

The form is a face of the API's document, not a second validator: the fields become the
same JSON a tenant would POST (``core.schedule_input`` then validates it as a whole), and
only what a form cannot carry is checked here — a payload that is not JSON, a number
field that is not a number (both read by :mod:`appliance.core.json_text`, as the API reads
its bodies), a local date-time that does not exist in the zone
(:mod:`appliance.ui.form_instants`).

Rules:

- The "Kind" radio picks which of ``cron``, ``at`` and ``every`` the document carries
  (the others' boxes keep what was typed but are not sent); ``dst`` goes with a cron only.
- The "Method" select likewise: with GET or DELETE the payload box (hidden) keeps what
  was typed but is not sent, and the document drops any stored body (``null``), so
  switching an edited schedule to a bodiless method just works.
- A field the form did not post is left out of the document, so an edit (a merge patch,
  ``core.schedule_input.merge_patch``) keeps its stored value; a blank optional field is
  ``null``, which takes the API's default. Saving the form unchanged gives an equal spec.
- Every API error path lands on the input that produced it (``retry.backoff[1]`` on
  "Backoff" as "entry 2 …", ``end_at`` on "End at"); one no input shows goes to the
  summary with its API name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from appliance.core.json_text import JsonTextError, parse_json_text, whole_number
from appliance.core.request_input import BODY_FIELDS
from appliance.core.retry_input import MAX_AGE_SECONDS, backoff_document
from appliance.core.schedules import (
    DEFAULT_CATCHUP_POLICY,
    Method,
    Overlap,
    PayloadKind,
    ScheduleSpec,
)
from appliance.core.timing import ScheduleKind, format_every, kind_of
from appliance.errors import FieldError
from appliance.ui.form_instants import instant_text, shown_instant

# The API's field names for the form's fields that differ.
_FORM_FIELD: Final = {
    "retry.max_attempts": "max_attempts",
    "retry.max_age_seconds": "max_age_seconds",
    "catchup.policy": "catchup_policy",
    "every_seconds": "every",
    "dst": "dst_gap",
    "dst.gap": "dst_gap",
    "dst.fold": "dst_fold",
    "body": "payload",
    "payload_template": "payload",
}
# API paths below a form field: ``retry.backoff[1]``, ``payload_template.a.b`` …
_NESTED: Final = (
    ("retry.backoff", "backoff"),
    ("payload_template", "payload"),
    ("payload", "payload"),
)
# The form's advanced options: grouped in a <details> collapsed by default
# (schedule_form.html), shown open when one holds an error or differs from a blank form.
ADVANCED_FIELDS: Final = (
    "key",
    "max_attempts",
    "backoff",
    "max_age_seconds",
    "jitter_seconds",
    "catchup_policy",
    "overlap",
    "dst_gap",
    "dst_fold",
)
FORM_FIELDS: Final = (
    "name",
    "kind",
    "cron",
    "at",
    "every",
    "timezone",
    "start_at",
    "end_at",
    "target_url",
    "method",
    "payload",
    "templated",
    *ADVANCED_FIELDS,
)
METHODS: Final = tuple(method.value for method in Method)
KINDS: Final = tuple(kind.value for kind in ScheduleKind)
_INSTANTS: Final = ("start_at", "end_at")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleForm:
    """What the form shows: its values as text, and errors by form field (``""``: an
    error of no one field, shown in the summary)."""

    values: Mapping[str, str]
    errors: Mapping[str, list[str]] = field(default_factory=dict)
    payload_kind: PayloadKind = PayloadKind.JSON


def blank_form() -> ScheduleForm:
    values = dict.fromkeys(FORM_FIELDS, "")
    values |= {
        "kind": ScheduleKind.CRON.value,
        "cron": "0 9 * * *",
        "timezone": "UTC",
        "target_url": "https://",
        "method": Method.POST.value,
        "payload": "{}",
        "max_attempts": "8",
        "backoff": "default",
        "jitter_seconds": "0",
        "catchup_policy": str(DEFAULT_CATCHUP_POLICY),
        "overlap": str(Overlap.ALLOW),
    }
    return ScheduleForm(values=values)


def form_of(spec: ScheduleSpec) -> ScheduleForm:
    """The form showing a stored schedule: every field as saving it back would send it."""
    payload = spec.body.decode("utf-8", errors="replace")
    if spec.payload_kind is PayloadKind.JSON and spec.method.carries_body:
        payload = json.dumps(json.loads(spec.body), indent=2, ensure_ascii=False)
    backoff = backoff_document(spec.retry.backoff)
    max_age = spec.retry.window_ms // 1000
    zone = spec.timezone
    return ScheduleForm(
        values={
            "name": spec.name,
            "key": spec.key or "",
            "kind": kind_of(spec).value,
            "cron": spec.cron,
            "at": shown_instant(spec.at, zone),
            "every": "" if spec.every_seconds is None else format_every(spec.every_seconds),
            "timezone": zone,
            "start_at": shown_instant(spec.start_at, zone),
            "end_at": shown_instant(spec.end_at, zone),
            "target_url": spec.target_url,
            "method": spec.method.value,
            "payload": payload,
            "templated": "1" if spec.templated else "",
            "max_attempts": str(spec.max_attempts),
            "backoff": _backoff_text(backoff),
            "max_age_seconds": "" if max_age == MAX_AGE_SECONDS else str(max_age),
            "jitter_seconds": str(spec.jitter_seconds),
            "catchup_policy": str(spec.catchup_policy),
            "overlap": str(spec.overlap),
            "dst_gap": spec.dst_gap or "",
            "dst_fold": spec.dst_fold or "",
        },
        payload_kind=spec.payload_kind,
    )


def _backoff_text(backoff: object) -> str:
    if isinstance(backoff, list):
        return ", ".join(str(delay) for delay in backoff)
    if isinstance(backoff, dict):
        return json.dumps(backoff)
    return str(backoff)


def document_of(
    form: Mapping[str, str], kind: PayloadKind = PayloadKind.JSON, *, templated: bool = False
) -> tuple[dict[str, object], list[FieldError]]:
    """The schedule JSON the form's values describe, and the errors only a form can have
    (the rest is the API's validation, run on the document). ``templated``: whether the
    payload is a template when the form does not say (a form without the checkbox)."""
    errors: list[FieldError] = []
    document: dict[str, object] = {key: form.get(key, "") for key in ("name", "target_url")}
    document |= timing_of(form, errors)
    method = form.get("method", "")
    if method:  # absent: a form before methods (editing, the stored one is kept)
        document["method"] = method
    if method in ("GET", "DELETE"):
        document |= dict.fromkeys(BODY_FIELDS)
    else:
        _payload(form, kind, templated, document, errors)
    document["retry"] = _retry(form, errors)
    document["jitter_seconds"] = _number(form, "jitter_seconds", errors)
    if "catchup_policy" in form:  # blank or absent: the API's default (or, editing, kept)
        document["catchup"] = {"policy": form["catchup_policy"] or None}
    if "overlap" in form:
        document["overlap"] = form["overlap"] or None
    if "key" in form:  # blank: none (editing, a blank box clears the key)
        document["key"] = form["key"].strip() or None
    return document, errors


def timing_of(form: Mapping[str, str], errors: list[FieldError]) -> dict[str, object]:
    """The timing fields of the document (also what the preview reads): the chosen
    kind's field, the timezone, the bounds posted, and a cron's ``dst``."""
    timezone = form.get("timezone", "").strip() or "UTC"
    document: dict[str, object] = {"timezone": timezone}
    kind = form.get("kind") or ScheduleKind.CRON.value  # a form before kinds: cron
    if kind == ScheduleKind.CRON:
        document["cron"] = form.get("cron", "")
        if "dst_gap" in form or "dst_fold" in form:
            gap, fold = form.get("dst_gap") or None, form.get("dst_fold") or None
            document["dst"] = {"gap": gap, "fold": fold} if gap or fold else None
    elif kind == ScheduleKind.AT:
        if form.get("at", "").strip():
            document["at"] = _instant(form, "at", timezone, errors)
        else:
            document["at"] = ""
            errors.append(
                FieldError(field="at", message="is required: the date and time it runs once")
            )
    elif kind == ScheduleKind.EVERY:
        document["every"] = form.get("every", "").strip()
    else:
        errors.append(FieldError(field="kind", message=f"must be one of {', '.join(KINDS)}"))
    for key in _INSTANTS:
        if key in form:
            blank = not form[key].strip()
            document[key] = None if blank else _instant(form, key, timezone, errors)
    return document


def _instant(form: Mapping[str, str], key: str, timezone: str, errors: list[FieldError]) -> str:
    text, problem = instant_text(form.get(key, ""), timezone)
    if problem:
        errors.append(FieldError(field=key, message=problem))
    return text


def _payload(
    form: Mapping[str, str],
    kind: PayloadKind,
    templated: bool,
    document: dict[str, object],
    errors: list[FieldError],
) -> None:
    if "templated_shown" in form:  # the checkbox was on the form: it decides
        templated = bool(form.get("templated"))
    payload = form.get("payload", "")
    if kind is PayloadKind.BODY and not templated:
        document["body"] = payload
        return
    if not payload.strip():
        return
    try:
        value = parse_json_text(payload)
    except JsonTextError as error:
        errors.append(FieldError(field="payload", message=f"is not JSON: {error.message}"))
        return
    document["payload_template" if templated else "payload"] = value


def _retry(form: Mapping[str, str], errors: list[FieldError]) -> dict[str, object]:
    retry: dict[str, object] = {"max_attempts": _number(form, "max_attempts", errors)}
    if "backoff" in form:
        retry["backoff"] = _backoff(form["backoff"], errors)
    if "max_age_seconds" in form:
        given = form["max_age_seconds"].strip()
        retry["max_age_seconds"] = _number(form, "max_age_seconds", errors) if given else None
    return retry


def _backoff(text: str, errors: list[FieldError]) -> object:
    """``default`` (or blank), a comma list of seconds, or an exponential backoff's JSON
    object; each list entry is sent as typed (a number when it reads as one), so the
    API's ``retry.backoff[i]`` says what is wrong with it."""
    text = text.strip()
    if not text or text == "default":
        return "default"
    if text.startswith("{"):
        try:
            return parse_json_text(text)
        except JsonTextError as error:
            errors.append(FieldError(field="backoff", message=f"is not JSON: {error.message}"))
            return None
    return [_entry(item.strip()) for item in text.split(",")]


def _entry(item: str) -> object:
    whole = whole_number(item)
    if whole is not None:
        return whole
    try:
        value = parse_json_text(item)
    except JsonTextError:
        return item
    return value if isinstance(value, float) else item


def with_errors(
    form: Mapping[str, str], errors: list[FieldError], kind: PayloadKind
) -> ScheduleForm:
    """The form as typed, with every error on its field (never losing what was typed)."""
    by_field: dict[str, list[str]] = {}
    for error in errors:
        name, message = form_error(error)
        key = name if name in FORM_FIELDS else ""
        text = message if key else f"{error.field}: {error.message}"
        by_field.setdefault(key, []).append(text)
    values = {key: form.get(key, "") for key in FORM_FIELDS}
    values["kind"] = values["kind"] or ScheduleKind.CRON.value
    return ScheduleForm(values=values, errors=by_field, payload_kind=kind)


def form_error(error: FieldError) -> tuple[str, str]:
    """The form field an API error belongs to, and its message there: a nested path is
    said in the message (``retry.backoff[1]`` → "entry 2 …" on ``backoff``)."""
    if error.field in _FORM_FIELD:
        return _FORM_FIELD[error.field], error.message
    for prefix, name in _NESTED:
        if error.field.startswith(prefix):
            rest = error.field[len(prefix) :]
            index = re.fullmatch(r"\[(\d+)\]", rest)
            if index:
                return name, f"entry {int(index.group(1)) + 1} {error.message}"
            return name, f"{rest.lstrip('.')} {error.message}".strip()
    return error.field, error.message


def _number(form: Mapping[str, str], key: str, errors: list[FieldError]) -> object:
    """The field's whole number, for the API's range check; None (with an error) when it
    spells none."""
    value = whole_number(form.get(key, ""))
    if value is None:
        errors.append(FieldError(field=key, message="must be a whole number"))
    return value


def advanced_open(form: ScheduleForm) -> bool:
    """Whether the advanced group starts open: a value that is not a blank form's, or an
    error, is never hidden from the person saving it."""
    defaults = blank_form().values
    return any(
        name in form.errors or form.values.get(name, "") != defaults.get(name, "")
        for name in ADVANCED_FIELDS
    )
