"""``steeple`` commands. Each error prints one line on stderr and exits non-zero."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from appliance import __version__
from appliance.cli import crontab as crontab_cli
from appliance.cli import ops as ops_cli
from appliance.cli import remote, schedules_as_code
from appliance.cli import tenants as admin
from appliance.cli import users as cli_users
from appliance.core.instants import format_instant
from appliance.errors import SteepleError, ValidationError
from appliance.settings.load import load_settings
from appliance.settings.model import Settings
from appliance.store.api_keys import ApiKey, Scope
from appliance.store.tenants import DEFAULT_OVERLAP_SECONDS, MAX_OVERLAP_SECONDS
from appliance.wiring import logs, runtime


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="steeple",
        description="Steeple: cron schedules to signed HTTP deliveries.",
        epilog="schedules, runs, events and login talk to a running appliance over its API"
        " with a tenant API key (docs/cli.md); the other commands act on this machine's"
        " data directory or database.",
    )
    parser.add_argument("--version", action="version", version=f"steeple {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the appliance (API, UI and scheduler)")
    _add_common(serve)
    serve.add_argument("--listen", metavar="HOST:PORT", help="default 127.0.0.1:8080")
    serve.add_argument(
        "--allow-target",
        metavar="CIDR",
        action="append",
        dest="allow_targets",
        help="let deliveries reach this non-public range (repeatable), e.g. 127.0.0.0/8",
    )
    serve.add_argument(
        "--trust-proxy",
        nargs="?",
        const="1",
        default=None,
        metavar="N",
        help="N reverse proxies (default 1) are in front: the client is the N-th"
        " X-Forwarded-For entry from the right, and X-Forwarded-Proto is believed",
    )

    tenant = commands.add_parser("tenant", help="manage tenants")
    tenant_commands = tenant.add_subparsers(dest="tenant_command", required=True, metavar="ACTION")
    create = tenant_commands.add_parser(
        "create", help="create a tenant; prints its id, API key and signing secret once"
    )
    create.add_argument("name")
    _add_common(create)
    ops_cli.add_tenant_commands(tenant_commands, _add_common)
    _add_key_commands(commands)
    _add_secret_commands(commands)
    ops_cli.add_commands(commands, _add_common)
    cli_users.register(commands, _add_common)
    remote.register(commands)
    schedules_as_code.register(commands)
    crontab_cli.register(commands)
    return parser


def _add_secret_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    secret = commands.add_parser("secret", help="manage tenants' signing secrets")
    actions = secret.add_subparsers(dest="secret_command", required=True, metavar="ACTION")
    rotate = actions.add_parser(
        "rotate", help="add a new signing secret (printed once); the others expire after an overlap"
    )
    rotate.add_argument("--tenant", required=True, metavar="TENANT_ID")
    rotate.add_argument(
        "--overlap-seconds",
        type=int,
        default=DEFAULT_OVERLAP_SECONDS,
        metavar="N",
        help="how long the current secrets keep signing beside the new one"
        f" (default {DEFAULT_OVERLAP_SECONDS}; 0: at once)",
    )
    _add_common(rotate)


def _add_key_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    key = commands.add_parser("key", help="manage tenants' API keys")
    actions = key.add_subparsers(dest="key_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="issue an API key; prints it once")
    create.add_argument("--tenant", required=True, metavar="TENANT_ID")
    create.add_argument("--scope", required=True, choices=[str(s) for s in Scope])
    create.add_argument("--name", default="operator key", help="what the key is for")
    listing = actions.add_parser("list", help="a tenant's live keys (never the keys)")
    listing.add_argument("--tenant", required=True, metavar="TENANT_ID")
    revoke = actions.add_parser("revoke", help="revoke a key at once")
    revoke.add_argument("key_id", metavar="KEY_ID")
    for parser in (create, listing, revoke):
        _add_common(parser)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", metavar="DIR", help="where steeple.db lives")
    parser.add_argument(
        "--database",
        metavar="URL",
        help="postgresql://… to use PostgreSQL (replicas) instead of the SQLite file",
    )
    parser.add_argument("--config", metavar="FILE", type=Path, help="a TOML settings file")


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, str] = {}
    if args.data_dir is not None:
        overrides["data_dir"] = args.data_dir
    if getattr(args, "database", None) is not None:
        overrides["database"] = args.database
    if getattr(args, "listen", None) is not None:
        overrides["listen"] = args.listen
    if getattr(args, "trust_proxy", None) is not None:
        overrides["trust_proxy"] = args.trust_proxy
    if getattr(args, "allow_targets", None):
        overrides["allow_targets"] = ",".join(args.allow_targets)
    config = args.config or (
        Path(os.environ["STEEPLE_CONFIG"]) if "STEEPLE_CONFIG" in os.environ else None
    )
    return load_settings(environ=os.environ, overrides=overrides, config_file=config)


def _serve(settings: Settings) -> None:
    logs.configure(settings, os.environ)
    trio.run(runtime.serve, settings)


def _tenant_create(settings: Settings, name: str) -> None:
    created = admin.create_tenant(settings, name=name)
    json.dump(
        {
            "tenant_id": created.tenant_id,
            "api_key": created.api_key,
            "signing_secret": created.signing_secret,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


def _key(settings: Settings, args: argparse.Namespace) -> None:
    if args.key_command == "create":
        issued = admin.create_key(
            settings, tenant_id=args.tenant, name=args.name, scope=Scope(args.scope)
        )
        _print_json(render_key(issued.key) | {"api_key": issued.api_key})
    elif args.key_command == "list":
        for key in admin.list_keys(settings, tenant_id=args.tenant):
            _print_json(render_key(key))
    else:
        _print_json(render_key(admin.revoke_key(settings, key_id=args.key_id)))


def render_key(key: ApiKey) -> dict[str, object]:
    return {
        "id": key.id,
        "tenant_id": key.tenant_id,
        "name": key.name,
        "scope": str(key.scope),
        "prefix": key.prefix,
        "created_at": format_instant(key.created_at),
        "last_used_at": None if key.last_used_at is None else format_instant(key.last_used_at),
        "revoked_at": None if key.revoked_at is None else format_instant(key.revoked_at),
    }


def _secret_rotate(settings: Settings, args: argparse.Namespace) -> None:
    if not 0 <= args.overlap_seconds <= MAX_OVERLAP_SECONDS:
        raise ValidationError.single(
            "--overlap-seconds", f"must be from 0 to {MAX_OVERLAP_SECONDS}"
        )
    secret = admin.rotate_secret(
        settings, tenant_id=args.tenant, overlap_seconds=args.overlap_seconds
    )
    _print_json(
        {
            "id": secret.id,
            "secret": secret.secret,
            "created_at": format_instant(secret.created_at),
        }
    )


def _print_json(document: object) -> None:
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")


# Whatever this process creates (the database, its WAL, the lock file) is the owner's
# alone: the data directory holds signing secrets (docs/configuration.md, "The data
# directory"). The store also creates its files with explicit modes.
PRIVATE_UMASK = 0o077


def main(argv: Sequence[str] | None = None) -> int:
    os.umask(PRIVATE_UMASK)
    args = _parser().parse_args(argv)
    if args.command in remote.COMMANDS:  # a client of an appliance: no settings, no database
        return remote.run(args, environ=os.environ)
    if args.command in schedules_as_code.COMMANDS:  # the same, for schedules as code
        return schedules_as_code.run(args, environ=os.environ)
    if args.command == crontab_cli.COMMAND:
        return crontab_cli.run(args)  # no settings: it reads only the crontab
    try:
        settings = _settings(args)
        ops_cli.guard(settings, args.command)
        if (code := ops_cli.run(settings, args)) is not None:
            return code
        if args.command == "serve":
            _serve(settings)
        elif args.command == "key":
            _key(settings, args)
        elif args.command == "secret":
            _secret_rotate(settings, args)
        elif args.command in cli_users.COMMANDS:
            cli_users.run(settings, args)
        elif not ops_cli.run_tenant(settings, args):
            _tenant_create(settings, args.name)
    except SteepleError as exc:
        print(f"steeple: error: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    except BaseExceptionGroup as group:
        # A service that failed on purpose (disk full, database locked) reaches us wrapped
        # by the root nursery; anything else keeps its traceback.
        error = steeple_error_in(group)
        if error is None:
            raise
        print(f"steeple: error: {error}", file=sys.stderr)  # noqa: T201
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def steeple_error_in(group: BaseExceptionGroup[BaseException]) -> SteepleError | None:
    """The first SteepleError of ``group`` if every exception in it is one, else None."""
    matched, rest = group.split(SteepleError)
    if matched is None or rest is not None:
        return None
    leaf: BaseException = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, SteepleError) else None
