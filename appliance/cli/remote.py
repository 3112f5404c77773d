"""``steeple schedules|runs|events|login``: the commands that talk to a running appliance
over its HTTP API with a tenant API key (:mod:`appliance.client`), not to a database.

Exit status, for scripts: 0 done; 1 the appliance refused (its RFC 9457 problem printed:
title, detail, each field error) or could not be reached; 2 the command line is wrong
(argparse's own errors, and a flag value such as ``--payload`` that is not JSON).
Output: tables and fields for people; ``--json`` prints the API's JSON (one line; NDJSON
for ``events --follow``). Refusals and notes always go to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO, TypeAlias

from appliance.client import events, runs, schedules
from appliance.client.http import ApiProblem, Client, ClientError, JsonObject
from appliance.client.output import Shown, compact
from appliance.client.profiles import DEFAULT_PROFILE, Profile, resolve_client, write_profile
from appliance.client.schedules import ScheduleFlags, parse_json_document
from appliance.errors import ValidationError

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
COMMANDS = ("schedules", "runs", "events", "login")
RUN_STATES = ("pending", "running", "retry_wait", "succeeded", "failed", "missed", "cancelled")


def register(commands: Commands) -> None:
    """Add the client commands to ``steeple``'s parser."""
    common = connection_options()
    _add_schedules(commands, common)
    _add_runs(commands, common)
    _add_events(commands, common)
    login = commands.add_parser(
        "login", help="save an appliance URL and API key as a profile (mode 0600)"
    )
    login.add_argument("--url", required=True, help="the appliance, e.g. https://steeple.example")
    login.add_argument(
        "--key-file", required=True, metavar="FILE", help="a file holding the API key (- for stdin)"
    )
    login.add_argument("--profile", default=DEFAULT_PROFILE, metavar="NAME")


def connection_options() -> argparse.ArgumentParser:
    """``--url``, ``--profile`` and ``--json``, as a parent parser: every client command
    (``steeple apply`` too) takes them."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("appliance")
    group.add_argument("--url", help="the appliance's URL (else STEEPLE_URL, else the profile)")
    group.add_argument(
        "--profile", metavar="NAME", help="a profile saved by `steeple login` (default: default)"
    )
    group.add_argument("--json", action="store_true", help="print the API's JSON, for scripts")
    return common


def _add_schedules(commands: Commands, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser("schedules", help="list and change schedules over the API")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="the tenant's schedules")
    _paging(listing)
    _with_id(actions, common, "get", "one schedule, every field")
    create = actions.add_parser("create", parents=[common], help="a new schedule")
    _schedule_fields(create)
    edit = _with_id(actions, common, "edit", "change fields (a merge patch, If-Match of a read)")
    _schedule_fields(edit)
    edit.add_argument("--remove-header", action="append", default=[], metavar="NAME")
    pause = _with_id(actions, common, "pause", "stop planning; runs not yet begun are withdrawn")
    pause.add_argument("--note", help="why (shown while paused)")
    _with_id(actions, common, "resume", "plan again from the next occurrence")
    _with_id(actions, common, "trigger", "run now (a manual occurrence)")
    _with_id(actions, common, "delete", "stop and remove; its runs stay readable")
    _paging(_with_id(actions, common, "runs", "a schedule's runs, newest first"))
    replay = _with_id(actions, common, "replay", "deliver a schedule's finished runs again")
    replay.add_argument(
        "--state", action="append", default=[], choices=RUN_STATES, help="default: failed"
    )
    replay.add_argument("--since", metavar="INSTANT", help="only occurrences at or after it")


def _with_id(
    actions: Commands, common: argparse.ArgumentParser, name: str, summary: str
) -> argparse.ArgumentParser:
    parser = actions.add_parser(name, parents=[common], help=summary)
    parser.add_argument("schedule_id", metavar="SCHEDULE_ID")
    return parser


def _schedule_fields(parser: argparse.ArgumentParser) -> None:
    body = parser.add_argument_group("fields (over --from-json's)")
    body.add_argument(
        "--from-json", metavar="FILE", help="the whole request body as JSON (- for stdin)"
    )
    body.add_argument("--name")
    body.add_argument("--key", help="the team's stable name for it (the `key` field)")
    timing = body.add_mutually_exclusive_group()
    timing.add_argument("--cron", metavar="EXPR", help="e.g. '0 3 * * *'")
    timing.add_argument("--every", metavar="PERIOD", help="e.g. 15m, 2h, 1d")
    timing.add_argument("--at", metavar="INSTANT", help="one-off, e.g. 2026-12-24T18:00:00+01:00")
    body.add_argument("--timezone", metavar="ZONE", help="IANA zone the cron runs in")
    body.add_argument("--target-url", "--target", dest="target_url", metavar="URL")
    body.add_argument("--method", help="POST (default), PUT, PATCH, GET or DELETE")
    body.add_argument("--header", action="append", default=[], metavar="NAME:VALUE")
    content = body.add_mutually_exclusive_group()
    content.add_argument("--payload", metavar="JSON", help="the JSON body sent")
    content.add_argument("--body", metavar="TEXT", help="a body sent verbatim")
    body.add_argument("--content-type", metavar="TYPE")


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=50, metavar="N", help="page size (1-200)")
    parser.add_argument("--all", action="store_true", help="every page")


def _add_runs(commands: Commands, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser("runs", help="read and replay runs over the API")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser("get", parents=[common], help="a run with every attempt")
    get.add_argument("run_id")
    failed = actions.add_parser("failed", parents=[common], help="runs that gave up, newest first")
    failed.add_argument("--schedule", metavar="SCHEDULE_ID")
    failed.add_argument("--since", metavar="INSTANT")
    failed.add_argument("--until", metavar="INSTANT")
    _paging(failed)
    replay = actions.add_parser("replay", parents=[common], help="deliver finished runs again")
    replay.add_argument("run_ids", nargs="+", metavar="RUN_ID")


def _add_events(commands: Commands, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "events", parents=[common], help="the tenant's event feed; --follow streams it live"
    )
    parser.add_argument("--follow", "-f", action="store_true", help="stream live (Ctrl-C ends)")
    parser.add_argument(
        "--after", type=int, metavar="SEQ", help="start after this seq (default: the oldest kept)"
    )
    parser.add_argument("--type", action="append", default=[], metavar="TYPE", dest="types")
    parser.add_argument("--schedule", metavar="SCHEDULE_ID")
    _paging(parser)


def run(args: argparse.Namespace, *, environ: Mapping[str, str]) -> int:
    """Run one client command; its exit status (module docstring)."""
    if args.command == "login":
        return exit_status(lambda: _login(args), as_json=False)

    def command() -> int:
        client = client_from(args, environ)
        if args.command == "events" and args.follow:
            return _follow(client, args, bool(args.json))
        _print(_dispatch(client, args), bool(args.json))
        return 0

    return exit_status(command, as_json=bool(args.json))


def client_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Client:
    """The client that ``--url`` and ``--profile`` (:func:`connection_options`), the
    environment and the profile file choose."""
    return resolve_client(url=args.url, profile=args.profile, environ=environ)


def exit_status(command: Callable[[], int], *, as_json: bool) -> int:
    """Run ``command``; a usage error (ValidationError) is 2, a refusal (printed as the
    problem) or no answer is 1, Ctrl-C 130, a closed stdout (``| head``) 0."""
    try:
        return command()
    except ValidationError as exc:
        for error in exc.errors:
            _say(f"steeple: error: {error.field}: {error.message}")
        return 2
    except ApiProblem as problem:
        _refused(problem, as_json)
        return 1
    except ClientError as exc:
        _say(f"steeple: error: {exc}")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader left (`steeple events --follow | head -1`): done, and quietly — the
        # interpreter's own flush of stdout at exit must not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _dispatch(client: Client, args: argparse.Namespace) -> Shown:
    if args.command == "events":
        return events.list_events(
            client,
            after=args.after or 0,
            types=args.types,
            schedule_id=args.schedule,
            limit=args.limit,
            every_page=args.all,
        )
    if args.command == "runs":
        if args.action == "get":
            return runs.get_run(client, args.run_id)
        if args.action == "replay":
            return runs.replay_runs(client, args.run_ids)
        return runs.failed_runs(
            client,
            schedule_id=args.schedule,
            since=args.since,
            until=args.until,
            limit=args.limit,
            every_page=args.all,
        )
    return _schedules(client, args)


def _schedules(client: Client, args: argparse.Namespace) -> Shown:
    action = args.action
    if action == "list":
        return schedules.list_schedules(client, limit=args.limit, every_page=args.all)
    if action == "create":
        return schedules.create_schedule(client, _flags(args))
    if action == "edit":
        return schedules.edit_schedule(client, args.schedule_id, _flags(args))
    if action == "pause":
        return schedules.pause_schedule(client, args.schedule_id, note=args.note)
    if action == "runs":
        return schedules.schedule_runs(
            client, args.schedule_id, limit=args.limit, every_page=args.all
        )
    if action == "replay":
        return schedules.replay_schedule_runs(
            client, args.schedule_id, states=tuple(args.state), since=args.since
        )
    one = {
        "get": schedules.get_schedule,
        "resume": schedules.resume_schedule,
        "trigger": schedules.trigger_schedule,
        "delete": schedules.delete_schedule,
    }
    return one[action](client, args.schedule_id)


def _flags(args: argparse.Namespace) -> ScheduleFlags:
    from_json = None
    if args.from_json is not None:
        text = _read_text(args.from_json, flag="--from-json")
        from_json = parse_json_document(text, flag="--from-json")
    return ScheduleFlags(
        from_json=from_json,
        name=args.name,
        key=args.key,
        cron=args.cron,
        every=args.every,
        at=args.at,
        timezone=args.timezone,
        target_url=args.target_url,
        method=args.method,
        headers=tuple(args.header),
        remove_headers=tuple(getattr(args, "remove_header", ())),
        payload=args.payload,
        body=args.body,
        content_type=args.content_type,
    )


def _read_text(source: str, *, flag: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else exc  # the name once
        raise ValidationError.single(flag, f"cannot read {source}: {why}") from exc


def _login(args: argparse.Namespace) -> int:
    key = _read_text(args.key_file, flag="--key-file").strip()
    if not key:
        raise ValidationError.single("--key-file", f"{args.key_file} holds no API key")
    client = Client.from_settings(args.url, key)
    try:  # the key works, and it is an appliance that answers: else refused, unsaved
        page = client.get("/v1/schedules", params={"limit": 1}).object()
        if not isinstance(page.get("items"), list):
            raise ClientError(f"{client.base_url} answered no list of schedules: is it Steeple?")
    except ApiProblem as problem:
        _refused(problem, as_json=False)
        _say(f"steeple: profile {args.profile!r} not saved")
        return 1
    except ClientError as error:
        _say(f"steeple: error: {error}")
        _say(f"steeple: profile {args.profile!r} not saved")
        return 1
    path = write_profile(Profile(name=args.profile, url=client.base_url, api_key=client.api_key))
    _say(f"steeple: profile {args.profile!r} saved in {path}: {client.base_url}")
    return 0


def _follow(client: Client, args: argparse.Namespace, as_json: bool) -> int:
    def show(event: JsonObject) -> None:
        _print(events.event_shown(event), as_json, out=sys.stdout)
        sys.stdout.flush()

    follower = events.Follower(
        client=client,
        params=events.event_params(args.types, args.schedule),
        last_seq=args.after,
        show=show,
        notice=lambda text: _say(f"steeple: {text}"),
    )
    try:
        follower.run()
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a follow ends
    return 0


def _print(shown: Shown, as_json: bool, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    stream.write((compact(shown.document) if as_json else shown.text) + "\n")
    for note in shown.notes:
        _say(note)


def _refused(problem: ApiProblem, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(compact(problem.problem) + "\n")
    _say(f"steeple: refused: {problem.summary}")
    for error in problem.errors:
        where = f"[{error.index}] " if error.index is not None else ""
        _say(f"  {where}{error.field}: {error.message}")


def _say(text: str) -> None:
    print(text, file=sys.stderr)  # noqa: T201
