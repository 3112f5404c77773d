"""``steeple`` commands. Each error prints one line on stderr and exits non-zero."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from appliance import __version__, runtime
from appliance.errors import SteepleError
from appliance.settings import Settings, load_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="steeple", description="Steeple: cron schedules to signed HTTP deliveries."
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

    tenant = commands.add_parser("tenant", help="manage tenants")
    tenant_commands = tenant.add_subparsers(dest="tenant_command", required=True, metavar="ACTION")
    create = tenant_commands.add_parser(
        "create", help="create a tenant; prints its id, API key and signing secret once"
    )
    create.add_argument("name")
    _add_common(create)
    return parser


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", metavar="DIR", help="where steeple.db lives")
    parser.add_argument("--config", metavar="FILE", type=Path, help="a TOML settings file")


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, str] = {}
    if args.data_dir is not None:
        overrides["data_dir"] = args.data_dir
    if getattr(args, "listen", None) is not None:
        overrides["listen"] = args.listen
    if getattr(args, "allow_targets", None):
        overrides["allow_targets"] = ",".join(args.allow_targets)
    config = args.config or (
        Path(os.environ["STEEPLE_CONFIG"]) if "STEEPLE_CONFIG" in os.environ else None
    )
    return load_settings(environ=os.environ, overrides=overrides, config_file=config)


def _serve(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # One line per delivery belongs in the attempts table, not the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    trio.run(runtime.serve, settings)


def _tenant_create(settings: Settings, name: str) -> None:
    created = runtime.create_tenant(settings, name=name)
    json.dump(
        {
            "tenant_id": created.tenant_id,
            "api_key": created.api_key,
            "signing_secret": created.signing_secret,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


# Whatever this process creates (the database, its WAL, the lock file) is the owner's
# alone: the data directory holds signing secrets (docs/configuration.md, "The data
# directory"). The store also creates its files with explicit modes.
PRIVATE_UMASK = 0o077


def main(argv: Sequence[str] | None = None) -> int:
    os.umask(PRIVATE_UMASK)
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
        if args.command == "serve":
            _serve(settings)
        else:
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
