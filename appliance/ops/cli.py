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
from appliance.settings import Settings

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
