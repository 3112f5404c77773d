"""What a client command shows: the document ``--json`` prints (the API's own JSON, so a
script reads the contract's shapes) and the text a person reads (tables and fields)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from appliance.client.http import JsonObject, JsonValue

MAX_CELL = 60  # a longer cell is cut with "…": the table stays readable; --json has it all


@dataclass(frozen=True, slots=True, kw_only=True)
class Shown:
    """One command's result. ``notes`` go to stderr (warnings, "more pages"), never into
    the JSON a script parses."""

    document: JsonValue
    text: str
    notes: tuple[str, ...] = field(default=())


def compact(document: JsonValue) -> str:
    """One line of JSON, as ``--json`` prints it (NDJSON for a stream)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def cell(value: JsonValue, *, width: int | None = MAX_CELL) -> str:
    """A value as a table cell or field: ``-`` for null, JSON for lists and objects, cut
    at ``width`` characters (None: never)."""
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, int | float):
        text = str(value)
    else:
        text = compact(value)
    text = " ".join(text.split())  # a newline inside a cell would break the row
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    if not rows:
        return "(none)"
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=False)) + "  " + line[-1]
        if len(line) > 1
        else line[0]
        for line in lines
    )


def fields(document: JsonObject, *, skip: Sequence[str] = ()) -> str:
    """``name  value`` lines, one per top-level field, in the API's order."""
    shown = [(k, v) for k, v in document.items() if k not in skip]
    width = max((len(k) for k, _ in shown), default=0)
    return "\n".join(f"{k.ljust(width)}  {cell(v, width=None)}" for k, v in shown)


def text_of(value: JsonValue) -> str:
    return value if isinstance(value, str) else ""


def items_of(page: JsonObject) -> list[JsonObject]:
    """The objects of a list page's ``items``."""
    items = page.get("items")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
