"""Reading tenant JSON objects field by field: every problem is recorded, none stops the
reading, so a 422 lists them all at once (docs/architecture.md, "The API").

- Each problem is a :class:`~appliance.errors.FieldError` with a dotted field name
  (``catchup.policy``) and a message that says how to fix it.
- ``null`` means "absent" (RFC 7396): the field takes its default, or is reported
  missing if it is required.
- ``true`` is not a number, though Python's bool is an int; text is bounded in length and
  free of control characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from appliance.errors import FieldError, ValidationError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class FieldReader:
    """Reads the fields of one JSON object, recording a FieldError for each bad one."""

    def __init__(
        self, obj: Mapping[str, object], prefix: str = "", errors: list[FieldError] | None = None
    ) -> None:
        self.obj = obj
        self.prefix = prefix
        self.errors: list[FieldError] = [] if errors is None else errors  # shared when nested

    def fail(self, key: str, message: str) -> None:
        self.errors.append(FieldError(field=self.prefix + key, message=message))

    def absorb(self, error: ValidationError, *, only: str | None = None) -> None:
        self.errors.extend(e for e in error.errors if only is None or e.field == only)

    def ok(self, key: str) -> bool:
        """Whether no problem has been recorded for ``key`` so far."""
        return all(e.field != self.prefix + key for e in self.errors)

    def given(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def text(self, key: str, *, default: str | None, max_chars: int, example: str) -> str:
        """A string field; ``default`` None makes it required."""
        value = self.obj.get(key)
        if value is None:
            if default is None:
                self.fail(key, f"is required, e.g. {json.dumps(example)}")
            return default or ""
        if not isinstance(value, str):
            self.fail(key, f"must be a string, e.g. {json.dumps(example)}")
            return ""
        if len(value) > max_chars:
            self.fail(key, f"is {len(value)} characters long; at most {max_chars} are allowed")
        elif _CONTROL.search(value):
            self.fail(key, "contains a control character (line break, tab, NUL …); remove it")
        return value

    def integer(self, key: str, *, default: int, low: int, high: int, unit: str) -> int:
        value = self.obj.get(key)
        if value is None:
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON Schema's integer: 30.0 is 30
        # bool is an int in Python, but `true` is not a number in JSON.
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be a whole number of {unit} from {low} to {high}")
            return default
        if not low <= value <= high:
            self.fail(key, f"is {value}; it must be from {low} to {high} {unit}")
            return default
        return value

    def boolean(self, key: str, *, default: bool) -> bool:
        value = self.obj.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, "must be true or false")
            return default
        return value

    def unknown(self, known: tuple[str, ...], *, read_only: frozenset[str] = frozenset()) -> None:
        """Refuse every key not in ``known``; ``read_only`` (top level only) are keys a
        response carries but a request may not set."""
        for key in self.obj:
            if key in known:
                continue
            if not self.prefix and key in read_only:
                self.fail(key, "is read-only; remove it from the request")
            else:
                self.fail(key, f"is not a known field; the fields are: {', '.join(known)}")

    def nested(self, key: str) -> FieldReader:
        """A collector for an optional nested object (``catchup``, ``retry``)."""
        value = self.obj.get(key)
        if value is None:
            value = {}
        elif not isinstance(value, dict):
            self.fail(key, "must be an object")
            value = {}
        return FieldReader(value, prefix=f"{self.prefix}{key}.", errors=self.errors)
