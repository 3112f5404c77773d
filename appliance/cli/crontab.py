"""``steeple import-crontab``: a crontab file in, a ``steeple apply`` file out
(docs/move-from-cron.md). It reads no settings and no database: only the crontab, the
machine's zone and the options; ``--apply`` sends the file through ``steeple apply``'s
own path (``client.apply``: ``POST /v1/schedules/apply``, all or nothing, never pruning).

Exit codes: 0 every entry moved (and, with ``--apply``, applied), 1 some were not (the
rest are still written or applied) or the appliance refused the file, 2 usage (a bad
option, a file that cannot be read, a zone that does not exist).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from appliance.client.apply import apply_items
from appliance.client.crontab.convert import Conversion, convert_crontab
from appliance.client.http import ApiProblem, ClientError
from appliance.client.profiles import resolve_client
from appliance.client.schedules_file import TABLE, FileProblem, FileRefused, dump, load
from appliance.core.cron import parse_cron
from appliance.errors import ValidationError

COMMAND = "import-crontab"
_SYSTEM_FILES = ("/etc/crontab", "/etc/cron.d/")
_ZONEINFO = "zoneinfo/"


class _Usage(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Zone:
    name: str
    source: str  # where it came from, said in the output


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        COMMAND, help="turn a crontab's curl and wget lines into a steeple apply file"
    )
    parser.add_argument("file", metavar="FILE", help="the crontab (- for standard input)")
    parser.add_argument(
        "--timezone",
        metavar="ZONE",
        help="the zone cron ran in (default: this machine's); a CRON_TZ line overrides it",
    )
    parser.add_argument(
        "--system",
        action="store_true",
        help="entries have a user column (/etc/crontab, /etc/cron.d/*: the default for those)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the apply file here")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print only the summary (with --apply: the plan, changing nothing)",
    )
    parser.add_argument(
        "--apply",
        action="store_true",
        help="apply the schedules to the appliance, as steeple apply would (never prunes)",
    )
    group = parser.add_argument_group("appliance (with --apply)")
    group.add_argument("--url", help="the appliance's URL (else STEEPLE_URL, else the profile)")
    group.add_argument("--profile", metavar="NAME", help="a profile saved by `steeple login`")


def run(args: argparse.Namespace) -> int:
    try:
        crontab = _read(args.file)
        zone = _zone(args.timezone)
    except _Usage as problem:
        print(f"steeple: error: {problem}", file=sys.stderr)  # noqa: T201
        return 2
    system = args.system or args.file.startswith(_SYSTEM_FILES)
    conversion = convert_crontab(crontab, zone=zone.name, system=system)
    listed = args.dry_run and not args.apply  # the summary on stdout lists them already
    for refused in () if listed else conversion.not_moved:
        print(f"steeple: line {refused.line} not moved: {refused.reason}", file=sys.stderr)  # noqa: T201
    text = apply_file(conversion, zone, args.file)
    accepted = True
    if args.output and (args.apply or not args.dry_run):
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as error:
            print(f"steeple: error: cannot write {args.output}: {error.strerror}", file=sys.stderr)  # noqa: T201
            return 2
    if args.apply:
        accepted = _apply(text, args, conversion)
    elif args.dry_run:
        sys.stdout.write(summary(conversion, zone))
    elif not args.output:
        sys.stdout.write(text)
    return 1 if conversion.not_moved or not accepted else 0


def _apply(text: str, args: argparse.Namespace, conversion: Conversion) -> bool:
    """Send the apply file through ``steeple apply``'s path; whether it was accepted."""
    try:
        client = resolve_client(url=args.url, profile=args.profile, environ=os.environ)
        items = load(text, env=os.environ)
        sys.stdout.write(apply_items(client, items, prune=False, dry_run=args.dry_run).text)
    except FileRefused as refused:
        for problem in refused.problems:
            shown = (
                problem.render(args.output)
                if args.output
                else _in_crontab(problem, text, conversion, args.file)
            )
            print(f"steeple: {shown}", file=sys.stderr)  # noqa: T201
        print("steeple: nothing applied", file=sys.stderr)  # noqa: T201
        return False
    except ApiProblem as problem:
        print(f"steeple: refused: {problem.summary}", file=sys.stderr)  # noqa: T201
        return False
    except ClientError as error:
        print(f"steeple: error: {error}", file=sys.stderr)  # noqa: T201
        return False
    return True


def _in_crontab(problem: FileProblem, text: str, conversion: Conversion, source: str) -> str:
    """``problem`` of the apply file nobody sees (no ``-o``) at the crontab line it came
    from: ``my.crontab line 8 (key): field: message``."""
    crontab = "standard input" if source == "-" else source
    headers = [n for n, line in enumerate(text.splitlines(), start=1) if line == f"[[{TABLE}]]"]
    index = sum(1 for header in headers if problem.line is not None and header <= problem.line)
    if not 0 < index <= len(conversion.moved):
        return problem.render(crontab)
    moved = conversion.moved[index - 1]
    place = FileProblem(line=None, field=problem.field, message=problem.message)
    return place.render(f"{crontab} line {moved.line} ({moved.schedule['key']})")


def _read(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) else error  # the name once
        raise _Usage(f"cannot read {name}: {why}") from None


def _zone(given: str | None) -> Zone:
    if given is not None:
        _check_zone(given, "--timezone")
        return Zone(given, "--timezone")
    return local_zone(os.environ.get("TZ"), Path("/etc/localtime"), Path("/etc/timezone"))


def _check_zone(name: str, where: str) -> None:
    try:
        parse_cron("* * * * *", name)
    except ValidationError as error:
        raise _Usage(f"{where} {name}: {error}") from None


def local_zone(tz: str | None, localtime: Path, timezone_file: Path) -> Zone:
    """The zone cron runs a user's crontab in: the machine's (``TZ``, else the zone
    ``/etc/localtime`` links to, else Debian's ``/etc/timezone``; UTC without any, as
    glibc; a copied ``/etc/localtime`` with no name is refused: pass ``--timezone``)."""
    if tz:
        _check_zone(tz.removeprefix(":"), "TZ")
        return Zone(tz.removeprefix(":"), "this machine's zone, from TZ")
    target = os.path.realpath(localtime) if localtime.is_symlink() else ""
    if _ZONEINFO in target:
        return Zone(target.split(_ZONEINFO, 1)[1], f"this machine's zone, from {localtime}")
    if timezone_file.is_file():
        name = timezone_file.read_text(encoding="utf-8").strip()
        _check_zone(name, str(timezone_file))
        return Zone(name, f"this machine's zone, from {timezone_file}")
    if localtime.exists():
        raise _Usage(f"cannot tell which zone {localtime} is; pass --timezone")
    return Zone("UTC", f"no {localtime} on this machine, so cron ran in UTC")


def apply_file(conversion: Conversion, zone: Zone, source: str) -> str:
    """The apply file: a header of comments (the zone, each line not moved, each note),
    then the schedules through the file format's own writer."""
    lines = [
        f"# Imported from {'standard input' if source == '-' else source} by steeple {COMMAND}.",
        f"# Zone: {zone.name} ({zone.source}); a CRON_TZ line sets it for the lines after it.",
        "# Review every schedule, then apply this file (docs/move-from-cron.md).",
        *_commented(summary_lines(conversion, each=False)),
    ]
    items = [moved.schedule for moved in conversion.moved]
    return "\n".join(lines) + "\n\n" + dump(items)


def summary(conversion: Conversion, zone: Zone) -> str:
    """What ``--dry-run`` prints: the zone, each schedule in a line, what did not move."""
    return "\n".join([f"Zone: {zone.name} ({zone.source}).", *summary_lines(conversion)]) + "\n"


def summary_lines(conversion: Conversion, *, each: bool = True) -> list[str]:
    """The counts, then (``each``) a line per schedule, the lines not moved and the notes."""
    moved, refused = len(conversion.moved), len(conversion.not_moved)
    lines = [f"{moved} line(s) moved, {refused} not moved."]
    if each and conversion.moved:
        lines.append("Moved:")
        lines += [f"  line {m.line} -> {_described(m.schedule)}" for m in conversion.moved]
    if conversion.not_moved:
        lines.append("Not moved:")
        lines += [
            f"  line {n.line}: {n.text.strip()}\n    {n.reason}" for n in conversion.not_moved
        ]
    notes = [(m.line, f"{m.schedule['key']}: {note}") for m in conversion.moved for note in m.notes]
    notes += [(r.line, r.text) for r in conversion.remarks]
    if notes:
        lines.append("Notes:")
        lines += [f"  line {line}: {text}" for line, text in sorted(notes, key=lambda n: n[0])]
    return lines


def _described(item: dict[str, object]) -> str:
    return (
        f"{item['key']}: {item['method']} {item['target_url']}"
        f" at {item['cron']!r} in {item['timezone']}"
    )


def _commented(lines: list[str]) -> list[str]:
    return ["#" + (" " + line if line else "") for text in lines for line in text.split("\n")]
