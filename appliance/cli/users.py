"""``steeple user create|list|set-role|remove|reset`` and ``steeple admin create``: the
people of the web UI (docs/ui.md, "People and sign-in").

No default password exists: a user is created with the password read from
``--password-file`` (hashed with argon2id before the database is opened); without one,
``user create`` invites the email to the tenant (:func:`appliance.store.invitations.invite_user`,
as the web UI's pages do) and ``admin create`` makes the operator without a password;
either prints a single-use setup link valid for an hour, and ``/setup/<token>`` in the
browser sets the password (and makes an invited user's account). Like the other operator
commands, these work while the appliance runs (SQLite serialises the writes).

``list``, ``set-role``, ``remove`` and ``reset`` are :mod:`appliance.store.people`, as on
the owners' ``/settings/users``; each change is an event naming ``operator:cli``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from appliance.clock import SystemClock
from appliance.core.events import Actor
from appliance.core.instants import format_instant
from appliance.core.passwords import hash_password
from appliance.errors import ValidationError
from appliance.settings.model import Settings
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection
from appliance.store.invitations import Invited, add_user_with_password, invite_user
from appliance.store.people import change_role, find_member, members, remove_user, reset_user
from appliance.store.users import (
    SETUP_LINK_MS,
    Role,
    create_user,
    find_tenant_id,
    issue_setup_token,
)
from appliance.wiring.storage import open_configured_store

COMMANDS = ("user", "admin")


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    add_common: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Add the ``user`` and ``admin`` commands; ``add_common`` adds --data-dir/--config."""
    user = commands.add_parser("user", help="manage web UI users of a tenant")
    user_actions = user.add_subparsers(dest="user_command", required=True, metavar="ACTION")
    create = user_actions.add_parser(
        "create", help="add a user; without --password-file prints a one-hour setup link"
    )
    create.add_argument("email")
    create.add_argument("--tenant", required=True, metavar="ID_OR_NAME")
    create.add_argument("--role", choices=[str(r) for r in Role], default=str(Role.EDITOR))
    _password_file(create)
    managing = _manage_commands(user_actions)
    admin = commands.add_parser("admin", help="manage operators (who see the operator pages)")
    admin_actions = admin.add_subparsers(dest="admin_command", required=True, metavar="ACTION")
    create_admin = admin_actions.add_parser(
        "create", help="add an operator; without --password-file prints a one-hour setup link"
    )
    create_admin.add_argument("email")
    _password_file(create_admin)
    for parser in (create, create_admin, *managing):
        add_common(parser)


def _manage_commands(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> list[argparse.ArgumentParser]:
    listing = actions.add_parser("list", help="list users: email, role, last sign-in")
    listing.add_argument("--tenant", metavar="ID_OR_NAME", help="only this tenant's users")
    set_role = actions.add_parser("set-role", help="give a user another role")
    remove = actions.add_parser("remove", help="remove a user; their sessions end at once")
    reset = actions.add_parser(
        "reset", help="end a user's sessions and print a fresh one-hour setup link"
    )
    for parser in (set_role, remove, reset):
        parser.add_argument("email", help="the user's email (or id)")
        parser.add_argument("--tenant", metavar="ID_OR_NAME", help="refuse a user of another")
    set_role.add_argument("role", choices=[str(r) for r in Role])
    return [listing, set_role, remove, reset]


def _password_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--password-file",
        type=Path,
        metavar="PATH",
        help="read the password from this file (its first line); never a default password",
    )


def run(settings: Settings, args: argparse.Namespace) -> None:
    """Create the user (or, without a password, the invitation) ``args`` describes and print
    it as one JSON line."""
    given = getattr(args, "password_file", None)
    password_hash = None if given is None else hash_password(_read(args))
    operator = args.command == "admin"
    now = SystemClock().now_ms()
    db = open_configured_store(settings)
    try:
        if not operator and args.user_command != "create":
            document = _manage(db, args, now)
        elif operator or password_hash is not None:
            document = db.write_now(_create, args=args, password_hash=password_hash, now=now)
        else:
            document = _invitation(db.write_now(_invite, args=args, now=now))
    finally:
        db.close()
    if "setup_token" in document:
        document["setup_link"] = f"{settings.public_base_url}/setup/{document.pop('setup_token')}"
        document["setup_link_expires_in_seconds"] = SETUP_LINK_MS // 1000
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")


def _manage(db: Store, args: argparse.Namespace, now: int) -> dict[str, object]:
    """``list`` (a read) or one change of ``set-role``, ``remove``, ``reset``."""
    if args.user_command == "list":
        listed = db.read_now(_list, tenant=args.tenant)
        return {"users": listed}
    return db.write_now(_change, args=args, now=now)


def _list(conn: Connection, *, tenant: str | None) -> list[dict[str, object]]:
    tenant_id = None if tenant is None else find_tenant_id(conn, id_or_name=tenant)
    return [
        {
            "id": m.user.id,
            "email": m.user.email,
            "tenant_id": m.user.tenant_id,
            "role": m.user.shown_role,
            "last_sign_in": None
            if m.last_sign_in_at is None
            else format_instant(m.last_sign_in_at),
        }
        for m in members(conn, tenant_id=tenant_id)
    ]


def _change(conn: Connection, *, args: argparse.Namespace, now: int) -> dict[str, object]:
    user = find_member(conn, who=args.email, tenant=args.tenant)
    actor = Actor.operator()
    document: dict[str, object] = {"id": user.id, "email": user.email}
    if args.user_command == "set-role":
        changed = change_role(conn, user=user, role=Role(args.role), now=now, actor=actor)
        document["role"] = changed.shown_role
    elif args.user_command == "remove":
        remove_user(conn, user=user, now=now, actor=actor)
        document["removed"] = True
    else:
        document["setup_token"] = reset_user(conn, user=user, now=now, actor=actor).token
    return document


def _invite(conn: Connection, *, args: argparse.Namespace, now: int) -> Invited:
    return invite_user(
        conn,
        tenant=args.tenant,
        email=args.email,
        role=Role(args.role),
        now=now,
        actor=Actor.operator(),
    )


def _invitation(invited: Invited) -> dict[str, object]:
    invitation = invited.invitation
    return {
        "invitation_id": invitation.id,
        "email": invitation.email,
        "tenant_id": invitation.tenant_id,
        "role": str(invitation.role),
        "operator": False,
        "setup_token": invited.token,
    }


def _create(
    conn: Connection, *, args: argparse.Namespace, password_hash: str | None, now: int
) -> dict[str, object]:
    """A tenant user with a password, or an operator (a setup link without one)."""
    if args.command == "admin":
        user = create_user(
            conn,
            email=args.email,
            tenant_id=None,
            role=Role.OWNER,
            operator=True,
            password_hash=password_hash,
            now=now,
        )
    else:
        assert password_hash is not None
        user = add_user_with_password(
            conn,
            tenant=args.tenant,
            email=args.email,
            role=Role(args.role),
            password_hash=password_hash,
            now=now,
        )
    document: dict[str, object] = {
        "id": user.id,
        "email": user.email,
        "tenant_id": user.tenant_id,
        "role": str(user.role),
        "operator": user.operator,
    }
    if password_hash is None:
        document["setup_token"] = issue_setup_token(conn, user_id=user.id, now=now)
    return document


def _read(args: argparse.Namespace) -> str:
    path: Path = args.password_file
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError.single("--password-file", f"cannot read {path}: {exc}") from None
    lines = content.splitlines()
    return lines[0] if lines else ""
