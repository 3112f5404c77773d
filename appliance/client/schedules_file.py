"""The schedules file (``schedules.toml``) that ``steeple apply`` reads and ``steeple
export`` writes (docs/schedules-in-git.md).

Rules this module guards:

- A file is ``[[schedule]]`` tables, each one schedule as the API's ``ScheduleInput`` has
  it plus its ``key`` (required, unique in the file); nothing else at the top level.
- ``${NAME}`` in ``target_url`` and header values is the environment variable ``NAME``
  (an unset one is a problem naming it and its line); ``$${`` is a literal ``${``.
  :func:`dump` escapes what it writes, so ``load(dump(items), env={})`` gives ``items``
  back, except a :class:`Placeholder` value, written as is for ``load`` to substitute.
- TOML has no null: :func:`dump` leaves a null field out (the API reads absent as null)
  and writes a ``payload`` or ``payload_template`` holding one as JSON text
  (``payload_json``, ``payload_template_json``), which :func:`load` reads back.
- Every problem is reported at once, with the line of the field it concerns (or of its
  ``[[schedule]]`` header), as ``schedules.toml:12: cron: …``.

Pure: only ``tomllib`` and text; the caller passes the environment.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from appliance.errors import SteepleError

TABLE: Final = "schedule"
KEY: Final = "key"
# A JSON-text spelling of a field whose value TOML cannot write (a null inside it).
JSON_SPELLINGS: Final = {"payload_json": "payload", "payload_template_json": "payload_template"}
# Written first, in this order; the rest in the order the item has them.
_LEADING: Final = ("key", "name", "cron", "at", "every_seconds", "timezone", "target_url", "method")
_SUBSTITUTED: Final = ("target_url", "headers")

_HEADER = re.compile(r'^\s*\[\[\s*(?:schedule|"schedule")\s*\]\]\s*(?:#.*)?$')
_SUBTABLE = re.compile(r'^\s*\[\s*(?:schedule|"schedule")\.([^\]]+)\]\s*(?:#.*)?$')
_ASSIGN = re.compile(r'^\s*((?:[A-Za-z0-9_-]+|"[^"]*")(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"))*)\s*=')
_VARIABLE = re.compile(r"\$\$\{|\$\{([^}]*)\}?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_DECODE_LINE = re.compile(r"\(at line (\d+), column \d+\)")

_Fail = Callable[[str, str], None]  # reports one problem: the field's path, the message


@dataclass(frozen=True, slots=True, kw_only=True)
class FileProblem:
    line: int | None  # 1-based; None when the file's shape hides it
    field: str | None  # the item's field path (``catchup.policy``), None for the file's own
    message: str

    def render(self, filename: str) -> str:
        """``schedules.toml:12: cron: …``, as a compiler names a problem."""
        where = filename if self.line is None else f"{filename}:{self.line}"
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class FileRefused(SteepleError):
    """A schedules file that cannot be read; ``problems`` lists every one, in file order
    (as a compiler lists them, whatever found them; those without a line first)."""

    def __init__(self, problems: list[FileProblem]) -> None:
        problems = sorted(problems, key=lambda p: -1 if p.line is None else p.line)
        super().__init__("; ".join(p.render("schedules file") for p in problems))
        self.problems = problems


@dataclass(frozen=True, slots=True, kw_only=True)
class FileItem:
    """One ``[[schedule]]`` of a file: its ``document`` (the API's apply item, ``key``
    included, ``${NAME}`` substituted), the line of its header and of each field."""

    key: str
    document: dict[str, object]
    line: int | None
    lines: Mapping[str, int] = field(default_factory=dict)

    def line_of(self, path: str) -> int | None:
        """The line of field ``path`` (``headers.Authorization``), or of the nearest
        enclosing field written on its own line, or of the item's header."""
        parts = path.split(".")
        for end in range(len(parts), 0, -1):
            found = self.lines.get(".".join(parts[:end]))
            if found is not None:
                return found
        return self.line


class Placeholder(str):
    """A string :func:`dump` writes as is, so its ``${NAME}`` are substituted on load
    (``Placeholder("Bearer ${TOKEN}")``); any other string is escaped."""

    __slots__ = ()


def load(text: str, *, env: Mapping[str, str]) -> list[FileItem]:
    """The items of a schedules file, in file order; :class:`FileRefused` listing every
    problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = _DECODE_LINE.search(str(error))
        message = _DECODE_LINE.sub("", str(error)).strip()
        line = int(found.group(1)) if found else None
        raise FileRefused([FileProblem(line=line, field=None, message=message)]) from None
    problems = [
        FileProblem(
            line=None,
            field=None,
            message=f"{name!r} is not a table of a schedules file;"
            f" write each schedule as a [[{TABLE}]] table",
        )
        for name in data
        if name != TABLE
    ]
    tables = data.get(TABLE, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        problems.append(
            FileProblem(
                line=None, field=None, message=f"write each schedule as a [[{TABLE}]] table"
            )
        )
        raise FileRefused(problems)
    spans = _spans(text, len(tables))
    items = []
    for table, (line, lines) in zip(tables, spans, strict=True):
        item, refused = _item(table, line, lines, env)
        problems.extend(refused)
        items.append(item)
    problems.extend(_duplicates(items))
    if problems:
        raise FileRefused(problems)
    return items


def _item(
    table: dict[str, object], line: int | None, lines: dict[str, int], env: Mapping[str, str]
) -> tuple[FileItem, list[FileProblem]]:
    problems: list[FileProblem] = []
    shell = FileItem(key="", document={}, line=line, lines=lines)

    def fail(path: str, message: str) -> None:
        problems.append(FileProblem(line=shell.line_of(path), field=path, message=message))

    document: dict[str, object] = {}
    for name, value in table.items():
        if name in JSON_SPELLINGS:
            value = _json_value(name, value, fail)
            name = JSON_SPELLINGS[name]
        if name in document:
            fail(name, "is given twice (once as JSON text); keep one")
        document[name] = _plain(value, name, fail)
    for name in _SUBSTITUTED:
        if name in document:
            document[name] = _substitute(document[name], name, env, fail)
    key = document.get(KEY)
    if not isinstance(key, str) or not key:
        fail(KEY, 'every schedule needs a key: a stable name such as "nightly-rollup"')
        key = ""
    return FileItem(key=key, document=document, line=line, lines=lines), problems


def _json_value(name: str, value: object, fail: _Fail) -> object:
    if not isinstance(value, str):
        fail(name, "must be a string of JSON text")
        return None
    try:
        return json.loads(value)
    except ValueError as error:
        fail(name, f"is not JSON text: {error}")
        return None


def _plain(value: object, path: str, fail: _Fail) -> object:
    """``value`` as JSON would have it: an offset date-time becomes RFC 3339 text."""
    if isinstance(value, dict):
        return {k: _plain(v, f"{path}.{k}", fail) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, path, fail) for v in value]
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, float) and not math.isfinite(value):
        fail(path, f"is {value}, which JSON has no number for")
        return None
    if isinstance(value, dt.date | dt.time):
        fail(
            path,
            'is a date or time without an offset; write an instant such as "2026-01-01T03:00:00Z"',
        )
        return None
    return value


def _substitute(value: object, path: str, env: Mapping[str, str], fail: _Fail) -> object:
    if isinstance(value, dict):
        return {k: _substitute(v, f"{path}.{k}", env, fail) for k, v in value.items()}
    if isinstance(value, list):  # headers as [name, value] pairs
        return [_substitute(v, path, env, fail) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name = match.group(1)
        if not match.group(0).endswith("}") or name is None or not _NAME.fullmatch(name):
            fail(
                path,
                f"{match.group(0)!r} is not a variable: write ${{NAME}}, or $${{ for a literal ${{",
            )
            return ""
        if name not in env:
            fail(path, f"${{{name}}} is not set in the environment")
            return ""
        return env[name]

    return _VARIABLE.sub(one, value)


def _duplicates(items: Sequence[FileItem]) -> list[FileProblem]:
    first: dict[str, FileItem] = {}
    problems = []
    for item in items:
        if not item.key:
            continue
        if item.key in first:
            seen = first[item.key].line_of(KEY)
            where = f"line {seen}" if seen is not None else "an earlier schedule"
            problems.append(
                FileProblem(
                    line=item.line_of(KEY),
                    field=KEY,
                    message=f"{item.key!r} is already the key of {where}",
                )
            )
        else:
            first[item.key] = item
    return problems


def _spans(text: str, count: int) -> list[tuple[int | None, dict[str, int]]]:
    """Each ``[[schedule]]``'s header line and its fields' lines, found by reading the
    text (tomllib keeps no positions). When the headers found are not the tables read
    (an inline array of tables), no lines."""
    spans: list[tuple[int | None, dict[str, int]]] = []
    prefix = ""
    open_string: str | None = None  # the delimiter of a multi-line string still open
    for number, raw in enumerate(text.splitlines(), start=1):
        starts_inside = open_string is not None
        open_string = _open_after(raw, open_string)
        if starts_inside:
            continue
        if _HEADER.match(raw):
            spans.append((number, {}))
            prefix = ""
        elif (sub := _SUBTABLE.match(raw)) and spans:
            prefix = _dotted(sub.group(1)) + "."
            spans[-1][1].setdefault(prefix[:-1], number)
        elif (assign := _ASSIGN.match(raw)) and spans:
            spans[-1][1].setdefault(prefix + _dotted(assign.group(1)), number)
    if len(spans) != count:
        return [(None, {}) for _ in range(count)]
    return spans


def _open_after(raw: str, open_string: str | None) -> str | None:
    """The multi-line string delimiter (three quotes) still open after line ``raw``, which
    began inside ``open_string`` (None: outside any). Single-line strings and a comment
    are stepped over, so a quote inside them opens nothing."""
    i = 0
    while i < len(raw):
        if open_string is not None:
            end = raw.find(open_string, i)
            if end < 0:
                return open_string
            i, open_string = end + 3, None
        elif raw.startswith(('"""', "'''"), i):
            open_string, i = raw[i : i + 3], i + 3
        elif raw[i] == '"':
            i += 1
            while i < len(raw) and raw[i] != '"':
                i += 2 if raw[i] == "\\" else 1
            i += 1
        elif raw[i] == "'":
            end = raw.find("'", i + 1)
            i = len(raw) if end < 0 else end + 1
        elif raw[i] == "#":
            return None
        else:
            i += 1
    return open_string


def _dotted(keys: str) -> str:
    return ".".join(part.strip().strip('"') for part in keys.split("."))


# Writing -------------------------------------------------------------------------------


def dump(items: list[dict[str, object]]) -> str:
    """A schedules file of ``items`` (API documents with a ``key``), in order: each a
    ``[[schedule]]`` table, nested values as inline tables, null fields left out (at
    any depth but a payload's, written as JSON text). TypeError for a value no schedule
    document holds (a null in a list outside a payload)."""
    blocks = []
    for item in items:
        lines = [f"[[{TABLE}]]"]
        ordered = [*(k for k in _LEADING if k in item), *(k for k in item if k not in _LEADING)]
        for name in ordered:
            value = item[name]
            if value is None:
                continue
            if name in JSON_SPELLINGS.values() and _holds_null(value):
                lines.append(f"{name}_json = {_string(_compact(value))}")
                continue
            escape = name in _SUBSTITUTED
            lines.append(f"{_key(name)} = {_value(value, escape=escape)}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _value(value: object, *, escape: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # JSON has no inf or nan; repr is valid TOML for the rest
    if isinstance(value, str):
        if escape and not isinstance(value, Placeholder):
            value = value.replace("${", "$${")
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v, escape=escape) for v in value) + "]"
    if isinstance(value, dict):
        # null is absent in a nested object too (the API reads JSON merge-patch style)
        pairs = [
            f"{_key(k)} = {_value(v, escape=escape)}" for k, v in value.items() if v is not None
        ]
        if not pairs:
            return "{}"
        return "{ " + ", ".join(pairs) + " }"
    raise TypeError(f"a schedules file cannot hold {type(value).__name__} {value!r}")


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else _string(name)


_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _holds_null(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_holds_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_null(v) for v in value)
    return False


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
