"""Parsers and dispatch of the operator's commands (registered by :mod:`appliance.cli`).

Guards every command shares, so an operator never acts on the wrong database unawares:

- each prints the database it opened (stderr: stdout stays machine-readable);
- each but ``serve``, ``init`` and ``healthcheck`` refuses a data directory that does not
  exist, with the fix, instead of creating an empty database that nothing serves.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TypeAlias

from appliance import admin
from appliance.core.instants import format_instant
from appliance.errors import ConfigError
from appliance.ops import init
from appliance.settings import CONFIG_FILENAME, Settings

AddCommon = Callable[[argparse.ArgumentParser], None]
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# Commands that may run before the data directory exists.
CREATE_DATA_DIR = frozenset({"serve", "init", "healthcheck"})


def add_tenant_commands(actions: Commands, add_common: AddCommon) -> None:
    listing = actions.add_parser("list", help="every tenant: id, name, live schedules")
    rename = actions.add_parser("rename", help="give a tenant another (unique) name")
    rename.add_argument("tenant_id", metavar="TENANT_ID")
    rename.add_argument("name")
    for parser in (listing, rename):
        add_common(parser)


def add_commands(commands: Commands, add_common: AddCommon) -> None:
    init = commands.add_parser(
        "init", help="create the data directory and a commented steeple.toml in it"
    )
    init.add_argument("--data-dir", metavar="DIR", help="where steeple.db will live")
    init.add_argument("--listen", metavar="HOST:PORT", help="written to steeple.toml")
    init.add_argument(
        "--allow-target",
        metavar="CIDR",
        action="append",
        dest="allow_targets",
        help="written to steeple.toml (repeatable), e.g. 127.0.0.0/8",
    )
    init.set_defaults(config=None)


def run(settings: Settings, args: argparse.Namespace) -> bool:
    """Run one of the commands of :func:`add_commands`; False for any other."""
    if args.command == "init":
        _init(settings, args)
        return True
    return False


def _init(settings: Settings, args: argparse.Namespace) -> None:
    chosen = {"listen": args.listen} if args.listen else {}
    if args.allow_targets:
        chosen["allow_targets"] = ",".join(args.allow_targets)
    written = init.write_config(settings, chosen)
    if written is None:
        print(  # noqa: T201
            f"steeple: {settings.data_dir / CONFIG_FILENAME} exists; left as it is",
            file=sys.stderr,
        )
        return
    print(f"steeple: wrote {written}", file=sys.stderr)  # noqa: T201
    print(  # noqa: T201
        f"next: steeple serve --data-dir {settings.data_dir}  (or STEEPLE_DATA_DIR)",
        file=sys.stderr,
    )


def guard(settings: Settings, command: str) -> None:
    """Refuse a missing data directory (unless ``command`` creates one); say which
    database the command uses."""
    if command in CREATE_DATA_DIR:
        return
    if not settings.data_dir.is_dir():
        raise ConfigError(
            "data_dir",
            f"{settings.data_dir} does not exist: pass the --data-dir (or STEEPLE_DATA_DIR)"
            f" that `steeple serve` uses, or create it with `steeple init --data-dir DIR`",
        )
    print(f"steeple: database {settings.db_path}", file=sys.stderr)  # noqa: T201


def run_tenant(settings: Settings, args: argparse.Namespace) -> bool:
    """Run ``tenant list`` or ``tenant rename``; False for another tenant action."""
    if args.tenant_command == "list":
        for tenant in admin.list_all_tenants(settings):
            print_json(
                {
                    "id": tenant.id,
                    "name": tenant.name,
                    "created_at": format_instant(tenant.created_at),
                    "schedules": tenant.schedules,
                }
            )
        return True
    if args.tenant_command == "rename":
        admin.rename(settings, tenant_id=args.tenant_id, name=args.name)
        print_json({"id": args.tenant_id, "name": args.name.strip()})
        return True
    return False


def print_json(document: object) -> None:
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
