"""Parsers and dispatch of the operator's commands (registered by :mod:`appliance.cli.main`).

Guards every command shares, so an operator never acts on the wrong database unawares:

- each prints the database it opened (stderr: stdout stays machine-readable);
- each but ``serve``, ``init`` and ``healthcheck`` refuses a data directory that does not
  exist, with the fix, instead of creating an empty database that nothing serves;
- ``migrate-store`` is given both its databases (no data directory), and names them in
  its report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

from appliance.cli import tenants as admin
from appliance.core.instants import format_instant
from appliance.errors import ConfigError, StoreError
from appliance.ops import backup, doctor, healthcheck, init, migrate_store, status
from appliance.settings.model import CONFIG_FILENAME, Settings
from appliance.store.infra.datadir import DIR_MODE
from appliance.store.infra.lockfile import holder
from appliance.store.infra.snapshot import BACKUPS_DIRNAME
from appliance.wiring import storage

AddCommon = Callable[[argparse.ArgumentParser], None]
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# Commands that may run before the data directory exists.
CREATE_DATA_DIR = frozenset({"serve", "init", "healthcheck"})
# Commands that name their databases in their arguments, not by the data directory.
OWN_DATABASES = frozenset({"migrate-store"})


def add_tenant_commands(actions: Commands, add_common: AddCommon) -> None:
    listing = actions.add_parser("list", help="every tenant: id, name, live schedules")
    rename = actions.add_parser("rename", help="give a tenant another (unique) name")
    rename.add_argument("tenant_id", metavar="TENANT_ID")
    rename.add_argument("name")
    suspend = actions.add_parser(
        "suspend", help="refuse a tenant's keys and users and stop its schedules"
    )
    resume = actions.add_parser("resume", help="undo `tenant suspend`")
    for parser in (suspend, resume):
        parser.add_argument("tenant", metavar="ID_OR_NAME")
    for parser in (listing, rename, suspend, resume):
        add_common(parser)


def add_commands(commands: Commands, add_common: AddCommon) -> None:
    init = commands.add_parser(
        "init", help="create the data directory and a commented steeple.toml in it"
    )
    init.add_argument("--data-dir", metavar="DIR", help="where steeple.db will live")
    init.add_argument(
        "--config",
        dest="config_target",
        metavar="FILE",
        type=Path,
        help="write the file here instead (e.g. /etc/steeple/steeple.toml for systemd)",
    )
    init.set_defaults(config=None)  # the file to write is not one to read
    init.add_argument("--listen", metavar="HOST:PORT", help="written to steeple.toml")
    init.add_argument(
        "--allow-target",
        metavar="CIDR",
        action="append",
        dest="allow_targets",
        help="written to steeple.toml (repeatable), e.g. 127.0.0.0/8",
    )
    backup = commands.add_parser(
        "backup", help="write a consistent, checked copy of the database (while serving)"
    )
    backup.add_argument(
        "--to", required=True, type=Path, metavar="PATH", help="a new file, or a directory"
    )
    restore = commands.add_parser(
        "restore", help="replace the database with a backup (the appliance stopped)"
    )
    restore.add_argument("source", type=Path, metavar="PATH")
    migrate = commands.add_parser(
        "migrate", help="apply pending schema migrations (a snapshot first)"
    )
    migrate.add_argument("--dry-run", action="store_true", help="only list them")
    doctor = commands.add_parser("doctor", help="check this installation; exit 1 on findings")
    status = commands.add_parser("status", help="the health figures of this data directory")
    status.add_argument("--json", action="store_true", help="one JSON object")
    probe = commands.add_parser(
        "healthcheck", help="exit 0 if the appliance on `listen` is ready (GET /readyz)"
    )
    probe.add_argument("--listen", metavar="HOST:PORT", help="default: the listen setting")
    for parser in (backup, restore, migrate, doctor, status, probe):
        add_common(parser)
    _add_migrate_store(commands)


def _add_migrate_store(commands: Commands) -> None:
    move = commands.add_parser(
        "migrate-store",
        help="copy a stopped SQLite appliance's database into an empty PostgreSQL database",
    )
    move.add_argument("--from", dest="source", required=True, metavar="sqlite:PATH")
    move.add_argument("--to", dest="target", required=True, metavar="postgresql://…")
    move.add_argument("--dry-run", action="store_true", help="check and count; write nothing")
    move.set_defaults(data_dir=None, config=None)


def run(settings: Settings, args: argparse.Namespace) -> int | None:
    """Run one of the commands of :func:`add_commands` and return its exit status; None
    for any other command."""
    if settings.uses_postgres and args.command in ("backup", "restore"):
        raise StoreError(
            f"`steeple {args.command}` copies the SQLite file; this appliance runs on"
            " PostgreSQL, whose backups are pg_dump's or point-in-time recovery's"
            ' (docs/scale-out.md, "Backups")'
        )
    if args.command == "init":
        _init(settings, args)
    elif args.command == "backup":
        made = backup.backup(settings, args.to)
        print_json({"path": str(made.path), "bytes": made.bytes, "schema": made.schema_version})
    elif args.command == "restore":
        restored = backup.restore(settings, args.source)
        print(  # noqa: T201
            f"steeple: restored {args.source} (schema {restored.schema_version}); the"
            f" previous files were moved aside: {', '.join(map(str, restored.moved_aside))}",
            file=sys.stderr,
        )
        print(backup.RESTORE_NOTE, file=sys.stderr)  # noqa: T201
    elif args.command == "migrate":
        _migrate(settings, dry_run=args.dry_run)
    elif args.command == "migrate-store":
        report = migrate_store.migrate_store(
            migrate_store.parse_source(args.source),
            migrate_store.parse_target(args.target),
            dry_run=args.dry_run,
        )
        print(migrate_store.render(report))  # noqa: T201
    elif args.command == "doctor":
        return _doctor(settings)
    elif args.command == "status":
        _status(settings, as_json=args.json)
    elif args.command == "healthcheck":
        ready, said = healthcheck.check(settings)
        print(f"steeple: {'ready' if ready else 'NOT READY'}: {said}")  # noqa: T201
        return 0 if ready else 1
    else:
        return None
    return 0


def _migrate(settings: Settings, *, dry_run: bool) -> None:
    done = backup.migrate(settings, dry_run=dry_run)
    if not done.pending:
        print(f"steeple: schema {done.before} is current", file=sys.stderr)  # noqa: T201
    elif dry_run:
        listed = ", ".join(f"{n:04d}" for n in done.pending)
        print(f"steeple: schema {done.before}; would apply {listed}", file=sys.stderr)  # noqa: T201
    else:
        kept = (
            "PostgreSQL's backups are the rollback"
            if settings.uses_postgres
            else f"the schema before is kept in {settings.data_dir / BACKUPS_DIRNAME}"
        )
        print(  # noqa: T201
            f"steeple: migrated schema {done.before} -> {done.after}; {kept}",
            file=sys.stderr,
        )


def _doctor(settings: Settings) -> int:
    found = doctor.examine(settings)
    for finding in found:
        print(finding)  # noqa: T201
    return doctor.exit_status(found)


def _status(settings: Settings, *, as_json: bool) -> None:
    shown = status.figures(settings)
    if as_json:
        print_json(shown)
        return
    width = max(map(len, shown))
    for name, value in shown.items():
        print(f"{name:<{width}}  {'-' if value is None else value}")  # noqa: T201


def _init(settings: Settings, args: argparse.Namespace) -> None:
    chosen = {"listen": args.listen} if args.listen else {}
    if args.allow_targets:
        chosen["allow_targets"] = ",".join(args.allow_targets)
    target = args.config_target or settings.data_dir / CONFIG_FILENAME
    if args.config_target is None or args.data_dir is not None:
        settings.data_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    written = init.write_config(target, chosen, in_data_dir=args.config_target is None)
    if written is None:
        print(f"steeple: {target} exists; left as it is", file=sys.stderr)  # noqa: T201
        return
    print(f"steeple: wrote {written}", file=sys.stderr)  # noqa: T201
    print(_after_init(settings, written), file=sys.stderr)  # noqa: T201


def _after_init(settings: Settings, written: Path) -> str:
    """What to do next. A running appliance read its settings when it started (the data
    directory's lock names its pid, ADR 0033), so the new file changes nothing until it
    restarts: say so, or the reader believes the choice is in force."""
    running = None if settings.uses_postgres else holder(settings.lock_path)
    if running is None:
        return f"next: steeple serve --data-dir {settings.data_dir}  (or STEEPLE_DATA_DIR)"
    pid = f" (pid {running})" if running else ""
    return (
        f"steeple: an appliance{pid} is serving {settings.data_dir} with the settings it"
        f" read when it started: restart it (stop it, then `steeple serve` again) to pick"
        f" up {written}"
    )


def guard(settings: Settings, command: str) -> None:
    """Refuse a missing data directory (unless ``command`` creates one); say which
    database the command uses."""
    if command in CREATE_DATA_DIR or command in OWN_DATABASES:
        return
    if settings.uses_postgres:
        print(f"steeple: database {storage.describe(settings)}", file=sys.stderr)  # noqa: T201
        return
    if not settings.data_dir.is_dir():
        raise ConfigError(
            "data_dir",
            f"{settings.data_dir} does not exist: pass the --data-dir (or STEEPLE_DATA_DIR)"
            f" that `steeple serve` uses, or create it with `steeple init --data-dir DIR`",
        )
    print(f"steeple: database {settings.db_path}", file=sys.stderr)  # noqa: T201


def run_tenant(settings: Settings, args: argparse.Namespace) -> bool:
    """Run ``tenant list|rename|suspend|resume``; False for another tenant action."""
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
    if args.tenant_command == "suspend":
        tenant_id, cancelled = admin.suspend(settings, id_or_name=args.tenant)
        state = "already suspended" if cancelled is None else "suspended"
        print_json({"id": tenant_id, "state": state, "runs_cancelled": cancelled or 0})
        return True
    if args.tenant_command == "resume":
        tenant_id, was = admin.resume(settings, id_or_name=args.tenant)
        print_json({"id": tenant_id, "state": "resumed" if was else "already active"})
        return True
    return False


def print_json(document: object) -> None:
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
