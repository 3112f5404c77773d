"""``steeple apply -f FILE [--dry-run] [--prune]`` and ``steeple export [-o FILE]``: a
tenant's schedules kept in a file, over the HTTP API (docs/schedules-in-git.md).

Exit status: 0 applied, planned or exported (also when nothing changes); 1 the file or
the appliance refused (every problem printed, by file line, to stderr) or the appliance
could not be reached; 2 the command line is wrong. ``--json``: ``apply`` prints the
API's plan, ``export`` the body of an apply of the keyed schedules (secrets masked).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from appliance.cli.remote import Commands, client_from, connection_options, exit_status
from appliance.client.apply import apply_items, export_items, export_text
from appliance.client.http import Client
from appliance.client.schedules_file import FileRefused, load

COMMANDS = ("apply", "export")


# An empty file is most often a failed pipe (`steeple export … | steeple apply -f - --prune`)
# or a truncated checkout: with --prune it would delete every keyed schedule.
EMPTY_PRUNE = (
    "steeple: {name} lists no schedule: with --prune that deletes every keyed schedule, so it"
    " is refused; nothing changed (--dry-run shows that plan; `steeple schedules delete ID`"
    " deletes one)"
)


def register(commands: Commands) -> None:
    common = connection_options()
    apply = commands.add_parser(
        "apply", parents=[common], help="make the tenant's keyed schedules match a file"
    )
    apply.add_argument(
        "-f", "--file", required=True, metavar="FILE", help="schedules.toml (- for stdin)"
    )
    apply.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    apply.add_argument(
        "--prune", action="store_true", help="delete keyed schedules the file does not list"
    )
    export = commands.add_parser(
        "export", parents=[common], help="write the tenant's schedules as a schedules file"
    )
    export.add_argument("--format", choices=["toml"], default="toml")
    export.add_argument("-o", "--output", metavar="FILE", help="default: standard output")


def run(
    args: argparse.Namespace,
    *,
    environ: Mapping[str, str],
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``apply`` or ``export``; the exit status (module docstring)."""
    stdout, stderr = out or sys.stdout, err or sys.stderr

    def command() -> int:
        client = client_from(args, environ)
        if args.command == "apply":
            return _apply(client, args, environ, stdout, stderr)
        return _export(client, args, stdout, stderr)

    return exit_status(command, as_json=bool(args.json))


def _apply(
    client: Client, args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO
) -> int:
    name = "<stdin>" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
    except OSError as error:
        print(f"steeple: error: cannot read {name}: {error.strerror}", file=err)
        return 1
    try:
        items = load(text, env=environ)
        if args.prune and not items and not args.dry_run:
            print(EMPTY_PRUNE.format(name=name), file=err)
            return 1
        applied = apply_items(client, items, prune=args.prune, dry_run=args.dry_run)
    except FileRefused as refused:
        for problem in refused.problems:
            print(problem.render(name), file=err)
        count = len(refused.problems)
        print(
            f"steeple: {name} refused ({count} problem{'s' * (count != 1)}); nothing changed",
            file=err,
        )
        return 1
    if args.json:
        print(json.dumps(applied.plan, ensure_ascii=False), file=out)
    else:
        out.write(applied.text)
    return 0


def _export(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.json:  # the body of an apply of them, for scripts
        keyed, _ = export_items(client)
        text = json.dumps({"schedules": keyed}, ensure_ascii=False) + "\n"
    else:
        text = export_text(client)
    if args.output is None:
        out.write(text)
        return 0
    path = Path(args.output)
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)  # a rename that failed leaves it
        print(f"steeple: error: cannot write {path}: {error.strerror}", file=err)
        return 1
    return 0
