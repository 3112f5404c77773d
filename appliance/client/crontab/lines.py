"""A crontab file as cron reads it, line by line (crontab(5), Vixie cron and cronie).

Rules this module follows:

- A line is blank, a comment (``#`` as its first non-blank character: a ``#`` later in a
  line belongs to the command), an environment setting (``NAME = value``, the value's
  surrounding quotes removed) or an entry: five time fields or one ``@`` macro, then, in
  the system format (``/etc/crontab``, ``/etc/cron.d/*``), a user name, then the command.
- ``CRON_TZ=zone`` sets the zone of the entries after it (cronie's rule). ``TZ=`` only sets
  the commands' environment: cron does not schedule by it, so neither does the import.
- In the command an unescaped ``%`` ends it: the rest is the command's standard input, each
  later ``%`` a newline. ``\\%`` is a literal ``%`` (the backslash removed).
- There are no line continuations: cron reads each line on its own, so a line that ends in
  ``\\`` runs without the next line. Such a line is refused rather than joined.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_ENV = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*")


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One cron job: its time fields (or macro) as written, and its command as cron runs it."""

    line: int
    text: str
    fields: str
    user: str | None
    command: str
    stdin: str | None
    zone: str | None  # the CRON_TZ in force, if any
    comment: str | None  # the comment line right above, if any


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """An environment line: cron gives it to the commands after it."""

    line: int
    name: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Unreadable:
    """A line that cron would not run as a job, or that the import will not read."""

    line: int
    text: str
    reason: str


Line = Entry | Setting | Unreadable


def read_crontab(text: str, *, system: bool) -> list[Line]:
    """Every line of ``text`` that is not blank or a comment, in order; ``system``: the
    entries carry a user column."""
    found: list[Line] = []
    zone: str | None = None
    comment: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            comment = stripped.lstrip("#").strip() or None if stripped else None
            continue
        item = _read_line(number, raw, system=system, zone=zone, comment=comment)
        comment = None
        if isinstance(item, Setting) and item.name == "CRON_TZ":
            zone = item.value or None
        found.append(item)
    return found


def _read_line(
    number: int, raw: str, *, system: bool, zone: str | None, comment: str | None
) -> Line:
    setting = _ENV.fullmatch(raw)
    if setting is not None:
        return Setting(line=number, name=setting[1], value=_unquote(setting[2]))
    if raw.rstrip().endswith("\\") and not raw.rstrip().endswith("\\\\"):
        return Unreadable(
            line=number,
            text=raw,
            reason="ends in \\: cron has no line continuation and runs this line without"
            " the next one; join the two lines",
        )
    words = raw.split()
    count = 1 if words[0].startswith("@") else 5
    count += 1 if system else 0
    if len(words) <= count:
        return Unreadable(line=number, text=raw, reason="no command after the time fields")
    if count in (1, 2) and words[0].lower() == "@reboot":
        return Unreadable(
            line=number,
            text=raw,
            reason="@reboot runs once when the machine starts; Steeple schedules fire by time",
        )
    if count in (1, 2) and words[0].lower() not in MACROS:
        return Unreadable(line=number, text=raw, reason=f"unknown macro {words[0]}")
    command, stdin = split_percent(_after_words(raw, count))
    return Entry(
        line=number,
        text=raw,
        fields=" ".join(words[: count - 1 if system else count]),
        user=words[count - 1] if system else None,
        command=command,
        stdin=stdin,
        zone=zone,
        comment=comment,
    )


def _after_words(raw: str, count: int) -> str:
    """The text after the first ``count`` blank-separated words, its leading blanks gone."""
    match = re.match(rf"\s*(?:\S+\s+){{{count}}}", raw)
    assert match is not None  # the caller counted more than `count` words
    return raw[match.end() :]


def split_percent(command: str) -> tuple[str, str | None]:
    """The command cron runs and its standard input (None without an unescaped ``%``)."""
    parts: list[str] = []
    current = ""
    index = 0
    while index < len(command):
        char = command[index]
        if char == "\\" and command[index + 1 : index + 2] == "%":
            current += "%"
            index += 2
            continue
        if char == "%":
            parts.append(current)
            current = ""
        else:
            current += char
        index += 1
    parts.append(current)
    if len(parts) == 1:
        return parts[0], None
    return parts[0], "\n".join(parts[1:])


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
