"""Payload templates: a schedule's JSON body with a fixed set of ``{{name}}`` placeholders,
rendered once per run (docs/schedules.md, "Payload variables").

Rules this module guards:

- The names are :data:`NAMES` and nothing else: no expressions, filters, loops or escapes.
  A ``{{…}}`` whose inside is not one of them is refused when the schedule is written
  (:func:`template_problems`), so a typo never reaches a receiver as literal text.
- Placeholders are replaced inside JSON *string values* only, at any depth; object keys
  are never rendered (and a placeholder in a key is refused). A string that is exactly one
  placeholder becomes the value as a JSON string — or JSON ``null`` when the value is
  absent (``previous_scheduled_for`` and ``window_start`` of a first occurrence); inside a
  longer string a placeholder becomes the value's text, or nothing when absent.
- Rendering works on the parsed value and writes compact JSON (the same form as a
  ``payload``), so the result is always valid JSON whatever the values contain (quotes,
  backslashes), and the same inputs always give the same bytes.
- The values come from canonical instants and ids only (:class:`TemplateValues`): the
  run's ``scheduled_for``, the previous occurrence of the schedule's timing, the schedule
  and run ids. Nothing read at send time, so every attempt of a run sends the same bytes
  (the store renders once, when the run is materialised, and keeps the bytes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final

from appliance.core.ids import occurrence_ids
from appliance.core.instants import format_scheduled_for

NAMES: Final = (
    "scheduled_for",
    "previous_scheduled_for",
    "window_start",
    "window_end",
    "schedule_id",
    "run_id",
)
_PLACEHOLDER: Final = re.compile(r"\{\{([^{}]*)\}\}")
_NAMES_TEXT: Final = ", ".join(f"{{{{{name}}}}}" for name in NAMES)


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateValues:
    """What one run's template is rendered with. ``previous_scheduled_for``: the last
    occurrence of the schedule's timing before ``scheduled_for`` (None for the first); the
    run's window is ``[previous_scheduled_for, scheduled_for)``."""

    scheduled_for: int
    previous_scheduled_for: int | None
    schedule_id: str
    run_id: str

    def text(self, name: str) -> str | None:
        """The value of placeholder ``name`` (one of :data:`NAMES`); None when absent."""
        if name in ("scheduled_for", "window_end"):
            return format_scheduled_for(self.scheduled_for)
        if name in ("previous_scheduled_for", "window_start"):
            previous = self.previous_scheduled_for
            return None if previous is None else format_scheduled_for(previous)
        if name == "schedule_id":
            return self.schedule_id
        if name == "run_id":
            return self.run_id
        raise KeyError(name)


def run_values(*, schedule_id: str, scheduled_for: int, previous: int | None) -> TemplateValues:
    """The values of the run of ``schedule_id`` at ``scheduled_for`` (its id derives from
    them, ADR 0037), after the occurrence ``previous``."""
    run_id, _ = occurrence_ids(schedule_id, format_scheduled_for(scheduled_for))
    return TemplateValues(
        scheduled_for=scheduled_for,
        previous_scheduled_for=previous,
        schedule_id=schedule_id,
        run_id=run_id,
    )


def template_problems(value: object, path: str = "payload_template") -> list[tuple[str, str]]:
    """Every ``(field, message)`` that makes ``value`` (parsed JSON) an invalid template:
    an unknown ``{{name}}`` in a string, or a placeholder in an object key."""
    problems: list[tuple[str, str]] = []
    _check(value, path, problems)
    return problems


def _check(value: object, path: str, problems: list[tuple[str, str]]) -> None:
    if isinstance(value, str):
        for match in _PLACEHOLDER.finditer(value):
            if match.group(1) not in NAMES:
                problems.append(
                    (
                        path,
                        f"{match.group(0)} is not a template variable; the variables are"
                        f" {_NAMES_TEXT}",
                    )
                )
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", problems)
    elif isinstance(value, dict):
        for key, item in value.items():
            if _PLACEHOLDER.search(key):
                problems.append(
                    (
                        f"{path}.{key}",
                        "has a {{…}} placeholder in an object key; placeholders are"
                        " substituted in string values only",
                    )
                )
            _check(item, f"{path}.{key}", problems)


def render(template: bytes, values: TemplateValues) -> bytes:
    """The body of one run: ``template`` (compact JSON, validated) rendered with
    ``values``, as compact JSON."""
    rendered = _render(json.loads(template), values)
    return json.dumps(rendered, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def _render(value: object, values: TemplateValues) -> object:
    if isinstance(value, str):
        return _render_text(value, values)
    if isinstance(value, list):
        return [_render(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _render(item, values) for key, item in value.items()}
    return value


def _render_text(text: str, values: TemplateValues) -> str | None:
    whole = _PLACEHOLDER.fullmatch(text)
    if whole is not None:
        return values.text(whole.group(1))
    return _PLACEHOLDER.sub(lambda match: values.text(match.group(1)) or "", text)
