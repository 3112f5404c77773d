"""Text a tenant typed, read as JSON or as a whole number: one reader for the API's
request bodies and the UI's form fields, so both refuse the same input the same way.

Rules:
- JSON text is refused (:class:`JsonTextError`, a message a person can act on) when it is
  not JSON (RFC 8259: no ``NaN``/``Infinity``), holds a number too large to be a finite
  float, an integer of more than :data:`MAX_INTEGER_DIGITS` digits, arrays/objects nested
  deeper than :data:`MAX_DEPTH`, or an unpaired UTF-16 surrogate escape. Nothing here
  raises anything else: Python's own limits (int-string conversion, recursion) are reached
  only through these checks.
- An integer within that many digits is kept exactly, even beyond 64 bits: a payload is
  the tenant's JSON and goes out as given; a field the appliance keeps as a number is
  range-checked by its reader (:meth:`appliance.core.json_fields.FieldReader.integer`).
- A whole number typed into a form is an optional sign and ASCII digits, nothing else
  (no ``²``, no ``1_000``, no Arabic-Indic digits), at most :data:`MAX_INTEGER_DIGITS`.
- No text of a request (a path segment, a query or form parameter, its name included)
  holds a NUL: PostgreSQL text cannot hold one, so refusing it at the door keeps both
  stores alike (:func:`field_with_nul`; in JSON, the field readers refuse control
  characters).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Final

MAX_DEPTH: Final = 64
MAX_INTEGER_DIGITS: Final = 4300  # CPython's default int-string limit: int() never raises
_WHOLE: Final = re.compile(r"[+-]?[0-9]+")
# May also match an escaped backslash followed by "ud8…" text: then the value is checked.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


class JsonTextError(ValueError):
    """Why a text is not JSON the appliance reads; ``message`` completes "… is not JSON: "."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def decode_json_bytes(data: bytes) -> object:
    """The JSON value of UTF-8 ``data``; raises JsonTextError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise JsonTextError("it is not UTF-8 text") from None
    return parse_json_text(text)


def parse_json_text(text: str) -> object:
    """The JSON value of ``text``; raises JsonTextError (see the module's rules)."""
    try:
        value = json.loads(
            text, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant
        )
    except RecursionError:
        raise JsonTextError("it nests too deeply") from None
    except json.JSONDecodeError as error:
        raise JsonTextError(f"{error.msg} (line {error.lineno}, column {error.colno})") from None
    except ValueError as error:  # from the hooks below
        raise JsonTextError(str(error)) from None
    if _deeper_than(value, MAX_DEPTH):
        raise JsonTextError(f"it nests deeper than {MAX_DEPTH} levels")
    # Decoded text holds a surrogate only where a \uD800-\uDFFF escape made one, so a text
    # without such an escape needs no second look.
    if _SURROGATE_ESCAPE.search(text) is None:
        return value
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise JsonTextError("it holds an unpaired UTF-16 surrogate (\\ud800-\\udfff)") from None
    return value


def whole_number(text: str) -> int | None:
    """The integer ``text`` spells (surrounding spaces allowed), or None when it spells
    none: see the module's rules. Never raises."""
    text = text.strip()
    if len(text.lstrip("+-")) > MAX_INTEGER_DIGITS or not _WHOLE.fullmatch(text):
        return None
    return int(text)


NUL_MESSAGE: Final = "contains a NUL character (\\x00); remove it"


def field_with_nul(fields: Iterable[tuple[str, str]]) -> str | None:
    """The name of the first (name, text) pair holding a NUL in either, or None."""
    for name, text in fields:
        if "\x00" in name or "\x00" in text:
            return name.replace("\x00", "\\x00")
    return None


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ValueError(f"the number {text[:20]}… has more than {MAX_INTEGER_DIGITS} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not JSON")


def _deeper_than(value: object, limit: int) -> bool:
    """Whether arrays/objects nest more than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
