"""A crontab's lines as ``steeple apply`` items, and every line not moved with its reason.

Rules this module guards (docs/move-from-cron.md):

- Nothing moves silently: each entry becomes a schedule or a :class:`NotMoved` with the
  reason; every environment line is a remark (moved nowhere), and each schedule carries the
  notes on what differs from what cron did.
- The timing is exactly cron's: the fields as written, checked by Steeple's own parser
  (ADR 0037's day rule is Vixie cron's), in the zone of the ``CRON_TZ`` line before it,
  else the zone the caller names (cron's: the machine's). ``N/S`` (a step from a single
  value) is refused: Vixie cron rejects it and cronie reads it otherwise than croniter.
- Variables: in a header a ``$NAME`` becomes ``${NAME}``, which ``steeple apply`` fills in
  from its environment (so a token need not be written into the file); elsewhere a
  variable set by a line of the crontab takes that value (as sh would); any other is
  refused: its value was the old machine's.
- ``key`` is stable while the line's timing, zone and command stay the same: a slug of the
  URL and a short hash, then ``-2``, ``-3`` for repeats. ``name`` is the comment line right
  above the entry, else the method and the URL without its query.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from appliance.client.crontab.curl import read_curl
from appliance.client.crontab.lines import Entry, Setting, Unreadable, read_crontab
from appliance.client.crontab.request import Arguments, Expand, Refused, Request, Templated
from appliance.client.crontab.shell import ShellRefusal, Word, split_command
from appliance.client.crontab.wget import read_wget
from appliance.client.crontab.wrappers import WRAPPERS, unwrap
from appliance.client.schedules_file import Placeholder
from appliance.core.cron import parse_cron
from appliance.core.delivery import check_tenant_headers
from appliance.core.secret_headers import looks_secret
from appliance.errors import ValidationError

_PROGRAMS = {"curl": read_curl, "wget": read_wget}
_SINGLE_STEP = re.compile(r"(?:^|[ ,])(\w+)/\d+")
_ENVIRONMENT_REMARKS = {
    "MAILTO": "cron mailed each job's output; Steeple keeps every answer in the run's"
    " history and can notify failures (docs/receiver.md)",
    "TZ": "sets the commands' environment only: cron does not schedule by it (CRON_TZ does)",
    "CRON_TZ": "the zone of the entries after it",
    "SHELL": "the shell cron ran the commands with; the import splits them as /bin/sh does",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved:
    line: int
    schedule: dict[str, object]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class NotMoved:
    line: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Remark:
    """An environment line: what became of it (it moves nowhere)."""

    line: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversion:
    moved: tuple[Moved, ...]
    not_moved: tuple[NotMoved, ...]
    remarks: tuple[Remark, ...]  # one per environment line


def convert_crontab(text: str, *, zone: str, system: bool) -> Conversion:
    """The schedules of ``text``'s curl and wget entries, in ``zone`` unless a ``CRON_TZ``
    line says otherwise; ``system``: the entries have a user column."""
    env: dict[str, Setting] = {}
    moved: list[Moved] = []
    not_moved: list[NotMoved] = []
    remarks: list[Remark] = []
    keys: set[str] = set()
    for item in read_crontab(text, system=system):
        if isinstance(item, Setting):
            env[item.name] = item
            remarks.append(_remark(item))
        elif isinstance(item, Unreadable):
            not_moved.append(NotMoved(line=item.line, text=item.text, reason=item.reason))
        else:
            try:
                moved.append(_move(item, env, zone=item.zone or zone, keys=keys, system=system))
            except Refused as refusal:
                not_moved.append(NotMoved(line=item.line, text=item.text, reason=str(refusal)))
    return Conversion(moved=tuple(moved), not_moved=tuple(not_moved), remarks=tuple(remarks))


def _remark(setting: Setting) -> Remark:
    what = _ENVIRONMENT_REMARKS.get(
        setting.name, "the commands' environment: not moved (a header may use it as ${NAME})"
    )
    shown = setting.value if setting.name in _ENVIRONMENT_REMARKS else "…"
    return Remark(line=setting.line, text=f"{setting.name}={shown}: {what}")


def _move(
    entry: Entry, env: dict[str, Setting], *, zone: str, keys: set[str], system: bool
) -> Moved:
    if entry.stdin is not None:
        raise Refused(
            "an unescaped % ends the command (cron gives the rest to its standard input);"
            " write \\% for a literal %"
        )
    _check_timing(entry.fields, zone)
    notes: list[str] = []
    request = _request(entry.command, _expander(env, notes), system=system)
    notes.extend(request.notes)
    _check_headers(request)
    notes.extend(_credentials_in_clear(request, notes))
    schedule = _schedule(entry, request, zone=zone)
    key = _unique_key(entry, request, zone, keys)
    return Moved(line=entry.line, schedule={"key": key, **schedule}, notes=tuple(notes))


def _check_timing(fields: str, zone: str) -> None:
    for single in _SINGLE_STEP.finditer(fields):
        if single[1] != "*" and "-" not in single[1]:
            raise Refused(
                f"{single[0].lstrip(', ')}: a step from one value means different things to"
                " different crons; write a range (e.g. 10-59/5)"
            )
    try:
        parse_cron(fields, zone)
    except ValidationError as error:
        raise Refused("; ".join(e.message for e in error.errors)) from None


def _request(command: str, expand: Expand, *, system: bool) -> Request:
    try:
        words = split_command(command)
    except ShellRefusal as refusal:
        first = command.split()[0] if command.split() else ""
        name = first.rsplit("/", 1)[-1]
        if re.fullmatch(r"[\w./-]+", first) and name not in (*_PROGRAMS, *WRAPPERS):
            raise Refused(f"{_not_http(first, [], system=True)}; and {refusal}") from None
        raise Refused(str(refusal)) from None
    if not words:
        raise Refused("no command")
    words, wrapping = unwrap(words)
    program = words[0].literal() or "" if words else ""
    reader = _PROGRAMS.get(program.rsplit("/", 1)[-1])
    if reader is None:
        raise Refused(_not_http(program, words, system=system))
    request = reader(Arguments(words[1:], expand))
    request.notes.extend(wrapping.notes)
    request.overlap = wrapping.overlap
    limit = wrapping.timeout_seconds
    if limit is not None and (request.timeout_seconds is None or limit < request.timeout_seconds):
        request.set_timeout(str(limit), option="timeout")
    return request


def _not_http(program: str, words: list[Word], *, system: bool) -> str:
    if "=" in program:
        return f"{program.split('=')[0]}=… before the command sets its environment"
    second = words[1].literal() if len(words) > 1 else None
    if not system and second is not None and second.rsplit("/", 1)[-1] in _PROGRAMS:
        return f"runs {program!r}: is it the user column of /etc/crontab? then pass --system"
    return f"runs {program!r}, not curl or wget: only HTTP calls move to Steeple"


def _expander(env: dict[str, Setting], notes: list[str]) -> Expand:
    def expand(word: Word, header: bool) -> str:
        if header and word.variables():
            return _templated(word, notes)
        text = ""
        for part in word.parts:
            if isinstance(part, str):
                text += part
            elif part.name in env:
                text += env[part.name].value
                notes.append(f"${part.name} is the value set on line {env[part.name].line}")
            else:
                raise ShellRefusal(
                    f"${part.name} is not set by this crontab: its value was the old"
                    " machine's; write it out"
                )
        return text

    return expand


def _templated(word: Word, notes: list[str]) -> Templated:
    text = ""
    for part in word.parts:
        if isinstance(part, str):
            text += part.replace("${", "$${")
        else:
            text += "${" + part.name + "}"
            notes.append(
                f"${part.name} in a header is kept as ${{{part.name}}}: set {part.name}"
                " where steeple apply runs"
            )
    return Templated(text)


def _check_headers(request: Request) -> None:
    try:
        check_tenant_headers([list(pair) for pair in request.headers])
    except ValidationError as error:
        raise Refused("; ".join(f"{e.field}: {e.message}" for e in error.errors)) from None


def _credentials_in_clear(request: Request, notes: list[str]) -> list[str]:
    """A note for each secret-bearing header written out (not ``${NAME}``): the file is
    meant for git, and export would mask it, so the import should not commit it in clear."""
    return [
        f"the {name} header holds a credential in clear: put it in an environment variable"
        " (${NAME}) before the file goes into git"
        for name, value in request.headers
        if looks_secret(name)
        and not isinstance(value, Templated)
        and not any(note.startswith(f"the {name} header holds") for note in notes)
    ]


def _schedule(entry: Entry, request: Request, *, zone: str) -> dict[str, object]:
    assert request.url is not None and request.method is not None
    split = urlsplit(request.url)
    name = entry.comment or f"{request.method} {split.netloc}{split.path}"
    schedule: dict[str, object] = {
        "name": name[:200],
        "method": request.method,
        "target_url": request.url,
        "cron": entry.fields,
        "timezone": zone,
    }
    if request.headers:
        schedule["headers"] = {
            name: Placeholder(value) if isinstance(value, Templated) else value
            for name, value in request.headers
        }
    if request.body is not None:
        schedule["body"] = request.body
        if request.content_type is not None:
            schedule["content_type"] = request.content_type
    if request.timeout_seconds is not None:
        schedule["timeout_seconds"] = request.timeout_seconds
    if request.retry:
        schedule["retry"] = dict(request.retry)
    if request.overlap is not None:
        schedule["overlap"] = request.overlap
    return schedule


def _unique_key(entry: Entry, request: Request, zone: str, keys: set[str]) -> str:
    assert request.url is not None
    split = urlsplit(request.url)
    words = re.findall(r"[a-z0-9]+", f"{split.hostname or ''} {split.path}".lower())
    slug = "-".join(word for word in words if word not in ("www", "com", "https", "http"))
    digest = hashlib.sha256(f"{entry.fields}\n{zone}\n{entry.command}".encode()).hexdigest()
    key = f"{slug[-48:].strip('-') or 'cron'}-{digest[:6]}"
    unique, count = key, 1
    while unique in keys:
        count += 1
        unique = f"{key}-{count}"
    keys.add(unique)
    return unique
