"""The schedule form: its fields to the API's schedule JSON and back, and the API's field
errors onto the form's fields.

The form is a face of the API's document, not a second validator: the fields become the
same JSON a tenant would POST (``core.schedule_input`` then validates it as a whole), and
only what a form cannot carry is checked here — a payload that is not JSON, a number
field that is not a number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from appliance.core.schedules import CatchupPolicy, PayloadKind, ScheduleSpec
from appliance.errors import FieldError

# The API's dotted field names for the form's fields that differ.
_FORM_FIELD: Final = {"retry.max_attempts": "max_attempts", "catchup.policy": "catchup_policy"}
FORM_FIELDS: Final = (
    "name",
    "cron",
    "timezone",
    "target_url",
    "payload",
    "max_attempts",
    "jitter_seconds",
    "catchup_policy",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleForm:
    """What the form shows: its values as text, and errors by form field (``""``: an
    error of no one field, shown in the summary)."""

    values: Mapping[str, str]
    errors: Mapping[str, list[str]] = field(default_factory=dict)
    payload_kind: PayloadKind = PayloadKind.JSON


def blank_form() -> ScheduleForm:
    return ScheduleForm(
        values={
            "name": "",
            "cron": "0 9 * * *",
            "timezone": "UTC",
            "target_url": "https://",
            "payload": "{}",
            "max_attempts": "8",
            "jitter_seconds": "0",
            "catchup_policy": str(CatchupPolicy.LATEST),
        }
    )


def form_of(spec: ScheduleSpec) -> ScheduleForm:
    """The form showing a stored schedule."""
    payload = spec.body.decode("utf-8", errors="replace")
    if spec.payload_kind is PayloadKind.JSON:
        payload = json.dumps(json.loads(spec.body), indent=2, ensure_ascii=False)
    return ScheduleForm(
        values={
            "name": spec.name,
            "cron": spec.cron,
            "timezone": spec.timezone,
            "target_url": spec.target_url,
            "payload": payload,
            "max_attempts": str(spec.max_attempts),
            "jitter_seconds": str(spec.jitter_seconds),
            "catchup_policy": str(spec.catchup_policy),
        },
        payload_kind=spec.payload_kind,
    )


def document_of(
    form: Mapping[str, str], kind: PayloadKind = PayloadKind.JSON
) -> tuple[dict[str, object], list[FieldError]]:
    """The schedule JSON the form's values describe, and the errors only a form can have
    (the rest is the API's validation, run on the document)."""
    errors: list[FieldError] = []
    document: dict[str, object] = {key: form.get(key, "") for key in ("name", "cron", "target_url")}
    document["timezone"] = form.get("timezone", "").strip() or "UTC"
    payload = form.get("payload", "")
    if kind is PayloadKind.BODY:
        document["body"] = payload
    elif payload.strip():
        try:
            document["payload"] = json.loads(payload)
        except json.JSONDecodeError as exc:
            errors.append(
                FieldError(
                    field="payload",
                    message=f"is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                )
            )
    document["retry"] = {"max_attempts": _number(form, "max_attempts", errors)}
    document["jitter_seconds"] = _number(form, "jitter_seconds", errors)
    document["catchup"] = {"policy": form.get("catchup_policy") or str(CatchupPolicy.LATEST)}
    return document, errors


def with_errors(
    form: Mapping[str, str], errors: list[FieldError], kind: PayloadKind
) -> ScheduleForm:
    """The form as typed, with every error on its field (never losing what was typed)."""
    by_field: dict[str, list[str]] = {}
    for error in errors:
        name = _FORM_FIELD.get(error.field, error.field)
        if name.startswith("payload") or name == "body":
            name = "payload"
        key = name if name in FORM_FIELDS else ""
        text = error.message if key else f"{error.field}: {error.message}"
        by_field.setdefault(key, []).append(text)
    values = {key: form.get(key, "") for key in FORM_FIELDS}
    return ScheduleForm(values=values, errors=by_field, payload_kind=kind)


def _number(form: Mapping[str, str], key: str, errors: list[FieldError]) -> object:
    text = form.get(key, "").strip()
    try:
        return int(text)
    except ValueError:
        errors.append(FieldError(field=key, message="must be a whole number"))
        return None
