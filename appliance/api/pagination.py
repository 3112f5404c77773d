"""Keyset pagination: ``?limit=`` (1–200, default 50) and an opaque ``?cursor=``.

A cursor is URL-safe base64 of ``<kind>:<position>``: the last item's sort key (a schedule
id, a run's ``scheduled_for`` ms). Keyset paging never skips or repeats an item when rows
are added or removed between pages. Cursors are opaque to clients and only positional:
the query they feed is scoped by tenant anyway, so a forged cursor reveals nothing. A
forged cursor is refused with a 422 naming ``cursor``, never passed on: a position that
must be a number is checked to fit SQLite's 64-bit INTEGER (:func:`number_position`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from quart import request

from appliance.errors import FieldError, ValidationError

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_NUMBER_POSITION = 2**63 - 1  # SQLite's largest INTEGER
_NOT_OURS = "is not a cursor this list returned; drop it"


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRequest:
    limit: int
    position: str | None  # decoded cursor, None for the first page


def page_request(kind: str) -> PageRequest:
    """The ``limit`` and decoded ``cursor`` of this request; raises ValidationError."""
    errors: list[FieldError] = []
    limit = read_limit(request.args.get("limit"), errors)
    position = _position(request.args.get("cursor"), kind, errors)
    if errors:
        raise ValidationError(errors)
    return PageRequest(limit=limit, position=position)


def number_position(page: PageRequest) -> int | None:
    """``page``'s position read as a whole number (a run's ``scheduled_for``), None for
    the first page; raises ValidationError for anything a list never returned."""
    if page.position is None:
        return None
    text = page.position
    if text.isascii() and text.isdigit() and len(text) <= 19:
        number = int(text)
        if number <= MAX_NUMBER_POSITION:
            return number
    raise ValidationError.single("cursor", _NOT_OURS)


def number_and_id_position(page: PageRequest, *, id_prefix: str) -> tuple[int, str] | None:
    """``page``'s position read as ``<number>:<id>`` (a run's ``scheduled_for`` and id, for
    lists ordered by both), None for the first page; raises ValidationError otherwise."""
    if page.position is None:
        return None
    number, _, item_id = page.position.partition(":")
    if (
        number.isascii()
        and number.isdigit()
        and len(number) <= 18
        and item_id.startswith(id_prefix)
    ):
        return int(number), item_id
    raise ValidationError.single("cursor", _NOT_OURS)


def encode_cursor(kind: str, position: str) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{position}".encode()).decode("ascii").rstrip("=")


def read_limit(text: str | None, errors: list[FieldError]) -> int:
    """A page's ``limit`` parameter: 1..MAX_LIMIT, DEFAULT_LIMIT when absent; else an error
    appended to ``errors``."""
    if text is None:
        return DEFAULT_LIMIT
    if text.isascii() and text.isdigit() and len(text) <= 3 and 1 <= int(text) <= MAX_LIMIT:
        return int(text)
    errors.append(
        FieldError(field="limit", message=f"must be a whole number from 1 to {MAX_LIMIT}")
    )
    return DEFAULT_LIMIT


def _position(text: str | None, kind: str, errors: list[FieldError]) -> str | None:
    if text is None or text == "":
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    prefix, sep, position = raw.partition(":")
    if prefix != kind or not sep or not position:
        errors.append(FieldError(field="cursor", message=_NOT_OURS))
        return None
    return position
