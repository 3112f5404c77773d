"""``steeple apply -f FILE [--dry-run] [--prune]`` and ``steeple export [-o FILE]``: a
tenant's schedules kept in a file, over the HTTP API (docs/schedules-in-git.md).

Exit status: 0 applied, planned or exported (also when nothing changes); 1 the file or
the appliance refused (every problem printed, by file line, to stderr) or the appliance
could not be reached; 2 the command line is wrong. ``--json`` prints the API's plan.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO, TypeAlias

from appliance.client.apply import apply_items, export_text
from appliance.client.http import ApiProblem, Client, ClientError
from appliance.client.profiles import resolve_client
from appliance.client.schedules_file import FileRefused, load

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
COMMANDS = ("apply", "export")


def register(commands: Commands) -> None:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("appliance")
    group.add_argument("--url", help="the appliance's URL (else STEEPLE_URL, else the profile)")
    group.add_argument("--profile", metavar="NAME", help="a profile saved by `steeple login`")
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
    apply.add_argument("--json", action="store_true", help="print the API's plan as JSON")
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
    out, err = out or sys.stdout, err or sys.stderr
    try:
        client = resolve_client(url=args.url, profile=args.profile, environ=environ)
        if args.command == "apply":
            return _apply(client, args, environ, out, err)
        return _export(client, args, out)
    except ApiProblem as problem:
        print(f"steeple: refused: {problem.summary}", file=err)
        for error in problem.errors:
            where = f"item {error.index}: " if error.index is not None else ""
            print(f"  {where}{error.field}: {error.message}", file=err)
        return 1
    except ClientError as error:
        print(f"steeple: error: {error}", file=err)
        return 1


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


def _export(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    text = export_text(client)
    if args.output is None:
        out.write(text)
        return 0
    path = Path(args.output)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return 0
