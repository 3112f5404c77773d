"""``steeple schedules …``: the schedule commands over ``/v1/schedules``.

A create or an edit body is built from ``--from-json`` (the whole body, as the API takes
it) with the flags laid over it, so the flags cover the common fields and the file every
field. An edit is a JSON merge patch sent with ``If-Match`` set to the ETag of the GET it
was built from: ``--header`` changes one header of the stored set, and a schedule changed
in between is refused (412) rather than overwritten with a stale header set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import quote

from appliance.client.http import Client, JsonObject, JsonValue
from appliance.client.output import Shown, cell, fields, items_of, table, text_of
from appliance.client.pages import read_list
from appliance.client.runs import run_rows, run_text
from appliance.errors import FieldError, ValidationError

TIMING_FIELDS = ("cron", "every", "every_seconds", "at")
BODY_FIELDS = ("payload", "body", "payload_template")
BODILESS = ("GET", "DELETE")
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFlags:
    """The fields given on the command line; None (or empty) when not given."""

    from_json: JsonObject | None = None
    name: str | None = None
    key: str | None = None
    cron: str | None = None
    every: str | None = None
    at: str | None = None
    timezone: str | None = None
    target_url: str | None = None
    method: str | None = None
    headers: tuple[str, ...] = ()  # "Name: value"
    remove_headers: tuple[str, ...] = ()
    payload: str | None = None  # JSON text
    body: str | None = None
    content_type: str | None = None


def parse_json_document(text: str, *, flag: str) -> JsonObject:
    """``text`` as a JSON object, or ValidationError naming ``flag`` (a usage error)."""
    try:
        document: JsonValue = json.loads(text)
    except ValueError as exc:
        raise ValidationError.single(flag, f"is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ValidationError.single(flag, "must be a JSON object (the request body)")
    return document


def create_body(flags: ScheduleFlags) -> JsonObject:
    """A create's body: ``--from-json`` with the flags over it."""
    return _body(flags, stored_headers={}, edit=False)


def patch_body(flags: ScheduleFlags, *, stored_headers: JsonValue) -> JsonObject:
    """An edit's merge patch: as a create's body, but ``--header`` and ``--remove-header``
    change the schedule's ``stored_headers``, a timing flag resets the other kinds, and
    ``--method GET`` or ``DELETE`` without a body field drops the stored body."""
    return _body(flags, stored_headers=stored_headers, edit=True)


def _body(flags: ScheduleFlags, *, stored_headers: JsonValue, edit: bool) -> JsonObject:
    errors: list[FieldError] = []
    body: JsonObject = dict(flags.from_json or {})
    simple = {
        "name": flags.name,
        "key": flags.key,
        "timezone": flags.timezone,
        "target_url": flags.target_url,
        "method": flags.method.upper() if flags.method else None,
        "body": flags.body,
        "content_type": flags.content_type,
    }
    body |= {name: value for name, value in simple.items() if value is not None}
    timing = {"cron": flags.cron, "every": flags.every, "at": flags.at}
    for kind, value in timing.items():
        if value is not None:
            if edit:  # the kind changes with the value: the stored kind's field is reset
                body |= {other: None for other in TIMING_FIELDS if other != kind}
            body[kind] = value
    if flags.payload is not None:
        try:
            body["payload"] = json.loads(flags.payload)
        except ValueError as exc:
            errors.append(FieldError(field="--payload", message=f"is not JSON: {exc}"))
    if edit and body.get("method") in BODILESS and not any(f in body for f in BODY_FIELDS):
        body |= {field: None for field in BODY_FIELDS}  # a GET carries none: drop the stored
    if flags.headers or flags.remove_headers:
        base = body.get("headers", stored_headers)
        body["headers"] = _changed_headers(base, flags, errors)
    if errors:
        raise ValidationError(errors)
    return body


def _changed_headers(base: JsonValue, flags: ScheduleFlags, errors: list[FieldError]) -> JsonObject:
    """``base`` (an object, or the API's list of [name, value] pairs) with the flags'
    headers set and removed; names compare case-insensitively, one entry per name."""
    headers: JsonObject = {}
    pairs = base.items() if isinstance(base, dict) else base if isinstance(base, list) else []
    for pair in pairs:
        name, value = pair if isinstance(pair, tuple | list) and len(pair) == 2 else ("", "")
        if isinstance(name, str) and name:
            headers[name] = value
    for given in flags.headers:
        name, colon, value = given.partition(":")
        if not colon or not name.strip():
            errors.append(FieldError(field="--header", message=f"takes Name:value, not {given!r}"))
            continue
        _drop(headers, name)
        headers[name.strip()] = value.strip()
    for name in flags.remove_headers:
        _drop(headers, name)
    return headers


def _drop(headers: JsonObject, name: str) -> None:
    for existing in [k for k in headers if k.lower() == name.strip().lower()]:
        del headers[existing]


def schedule_path(schedule_id: str, action: str = "") -> str:
    return f"/v1/schedules/{quote(schedule_id, safe='')}" + (f"/{action}" if action else "")


def list_schedules(client: Client, *, limit: int, every_page: bool) -> Shown:
    page = read_list(client, "/v1/schedules", {}, limit=limit, every_page=every_page)
    rows = [_schedule_row(s) for s in items_of(page)]
    text = table(["ID", "KEY", "NAME", "STATUS", "TIMING", "NEXT", "METHOD", "TARGET"], rows)
    return Shown(document=page, text=text, notes=_more(page))


def _schedule_row(schedule: JsonObject) -> list[str]:
    named = [cell(schedule.get(k)) for k in ("id", "key", "name", "status")]
    request = [cell(schedule.get("method")), cell(schedule.get("target_url"))]
    return [*named, timing(schedule), _next(schedule), *request]


def get_schedule(client: Client, schedule_id: str) -> Shown:
    return _shown_schedule(client.get(schedule_path(schedule_id)).object())


def create_schedule(client: Client, flags: ScheduleFlags) -> Shown:
    body = create_body(flags)
    return _shown_schedule(client.post("/v1/schedules", json=body).object(), changed="created")


def edit_schedule(client: Client, schedule_id: str, flags: ScheduleFlags) -> Shown:
    read = client.get(schedule_path(schedule_id))
    patch = patch_body(flags, stored_headers=read.object().get("headers"))
    if not patch:
        raise ValidationError.single("schedules edit", "give a field to change, or --from-json")
    headers = MERGE_PATCH | ({"If-Match": read.etag} if read.etag else {})
    reply = client.patch(schedule_path(schedule_id), json=patch, headers=headers)
    return _shown_schedule(reply.object(), changed="changed")


def pause_schedule(client: Client, schedule_id: str, *, note: str | None) -> Shown:
    body: JsonObject = {"note": note} if note is not None else {}
    schedule = client.post(schedule_path(schedule_id, "pause"), json=body).object()
    return _one_line(schedule, "paused")


def resume_schedule(client: Client, schedule_id: str) -> Shown:
    return _one_line(client.post(schedule_path(schedule_id, "resume")).object(), "resumed")


def delete_schedule(client: Client, schedule_id: str) -> Shown:
    client.delete(schedule_path(schedule_id))
    return Shown(document={"id": schedule_id, "deleted": True}, text=f"deleted {schedule_id}")


def trigger_schedule(client: Client, schedule_id: str) -> Shown:
    reply = client.post(schedule_path(schedule_id, "trigger"))
    run = reply.object()
    how = "triggered" if reply.status == 201 else "already triggered this second"
    head = f"{how}: run {cell(run.get('id'))} for {cell(run.get('scheduled_for'))}"
    return Shown(document=run, text=f"{head}\n{run_text(run)}")


def schedule_runs(client: Client, schedule_id: str, *, limit: int, every_page: bool) -> Shown:
    runs_path = schedule_path(schedule_id, "runs")
    page = read_list(client, runs_path, {}, limit=limit, every_page=every_page)
    return Shown(document=page, text=run_rows(items_of(page)), notes=_more(page))


def replay_schedule_runs(
    client: Client, schedule_id: str, *, states: tuple[str, ...], since: str | None
) -> Shown:
    """Replay the schedule's finished runs in ``states`` (failed by default), as of the
    appliance's own clock: ``as_of`` is its ``Date`` header (whole seconds, so never in
    its future, whatever this machine's clock says)."""
    probe = client.get(schedule_path(schedule_id))  # 404 before anything is replayed
    as_of = _instant_of_http_date(probe.headers.get("date", ""))
    run_filter: JsonObject = {"schedule_id": schedule_id, "state": list(states or ("failed",))}
    if since is not None:
        run_filter["since"] = since
    result = client.post("/v1/runs/replay", json={"filter": run_filter, "as_of": as_of}).object()
    return Shown(document=result, text=fields(result))


def _instant_of_http_date(value: str) -> str:
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError.single(
            "Date", f"the appliance sent no usable Date: {value!r}"
        ) from exc
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def timing(schedule: JsonObject) -> str:
    """``0 3 * * * Europe/Paris``, ``every 15m`` or ``at 2026-12-24T17:00:00Z``."""
    zone = text_of(schedule.get("timezone"))
    if isinstance(cron := schedule.get("cron"), str):
        return cron + (f" {zone}" if zone and zone != "UTC" else "")
    if isinstance(every := schedule.get("every_seconds"), int):
        return f"every {_period(every)}"
    return f"at {cell(schedule.get('at'))}"


def _period(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _next(schedule: JsonObject) -> str:
    upcoming = schedule.get("next_runs")
    if isinstance(upcoming, list) and upcoming and isinstance(upcoming[0], dict):
        return cell(upcoming[0].get("scheduled_for"))
    return "-"


def _shown_schedule(schedule: JsonObject, *, changed: str = "") -> Shown:
    head = f"{changed} {cell(schedule.get('id'))}\n" if changed else ""
    body = fields(schedule, skip=("warnings", "next_runs", "headers"))
    headers = schedule.get("headers")
    if isinstance(headers, dict) and headers:
        body += "\nheaders" + "".join(f"\n  {k}: {cell(v)}" for k, v in headers.items())
    upcoming = schedule.get("next_runs")
    if isinstance(upcoming, list) and upcoming:
        body += "\nnext runs" + "".join(
            f"\n  {cell(r.get('scheduled_for'))}" for r in upcoming if isinstance(r, dict)
        )
    return Shown(document=schedule, text=head + body, notes=_warnings(schedule))


def _one_line(schedule: JsonObject, verb: str) -> Shown:
    text = f"{verb} {cell(schedule.get('id'))} ({cell(schedule.get('name'))})"
    return Shown(document=schedule, text=text)


def _warnings(schedule: JsonObject) -> tuple[str, ...]:
    found = schedule.get("warnings")
    if not isinstance(found, list):
        return ()
    return tuple(
        f"warning: {cell(w.get('code'))}: {cell(w.get('message'))}"
        for w in found
        if isinstance(w, dict)
    )


def _more(page: JsonObject) -> tuple[str, ...]:
    if isinstance(cursor := page.get("next_cursor"), str) and cursor:
        return ("more: --all reads every page",)
    return ()
