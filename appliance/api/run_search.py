"""A tenant's runs across all its schedules: ``GET /v1/runs`` (the dead-letter view is
``?state=failed``) and ``POST /v1/runs/replay`` (many runs at once).

- Filters, in the query of the list and in a replay's ``filter`` object alike: ``state``
  (repeatable / a list: any of them), ``schedule_id``, ``since`` (inclusive) and ``until``
  (exclusive) — RFC 3339 instants bounding ``scheduled_for`` — and ``http_status``, the
  run's last HTTP status. Every bad one answers 422 naming it.
- The list is newest first (``scheduled_for``, then id), keyset-paged by an opaque
  ``cursor`` (:mod:`appliance.api.pagination`); queries are :mod:`appliance.store.run_search`.
- A replay takes ``{"run_ids": [...]}`` (at most 1000; all or nothing: unknown ids 404,
  open ones 409, each naming the ids) or ``{"filter": {...}, "as_of": <instant>}``: every
  matching run last changed at or before ``as_of`` (not in the future, so repeating the
  request replays nothing twice) is counted in ``matched``; the finished ones of live
  schedules are replayed, open ones and those of deleted schedules are counted apart.
  Replayed runs become due at ``replay_rate_per_second`` (:mod:`appliance.store.usecases.manual`),
  so a large replay does not hold up the tenant's scheduled runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from quart import Response, request
from quart_trio import QuartTrio

from appliance.api.auth import authenticate, checked_inputs, read_as_tenant
from appliance.api.bodies import json_response, read_json
from appliance.api.context import context
from appliance.api.pagination import encode_cursor, number_and_id_position, page_request
from appliance.api.rendering import render_run
from appliance.core.instants import parse_instant
from appliance.core.runs import RunState
from appliance.errors import FieldError, ValidationError
from appliance.store.run_search import Position, RunFilter, search_runs
from appliance.store.usecases.manual import (
    MAX_REPLAY_IDS,
    ReplayCount,
    replay_matching,
    replay_runs,
)

_CURSOR_KIND = "runs"
_FILTER_FIELDS = ("state", "schedule_id", "since", "until", "http_status")


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/runs", view_func=list_all_runs, methods=["GET"])
    app.add_url_rule("/v1/runs/replay", view_func=replay_many, methods=["POST"])


async def list_all_runs() -> Response:
    where, limit, before = await checked_inputs(_list_query)
    runs = await read_as_tenant(
        lambda conn, tenant_id: search_runs(
            conn, tenant_id=tenant_id, where=where, limit=limit + 1, before=before
        )
    )
    cursor = None
    if len(runs) > limit:
        last = runs[limit - 1]
        cursor = encode_cursor(_CURSOR_KIND, f"{last.scheduled_for}:{last.id}")
    return json_response(
        {"items": [render_run(run) for run in runs[:limit]], "next_cursor": cursor}
    )


async def replay_many() -> Response:
    tenant_id = await authenticate()
    ctx = context()
    body = await read_json()
    now = ctx.clock.now_ms()
    rate = ctx.replay_rate_per_second
    if isinstance(body, dict) and "run_ids" in body and "filter" not in body:
        run_ids = _run_ids(body)
        count = await ctx.db.write(
            replay_runs, tenant_id=tenant_id, run_ids=run_ids, now=now, rate_per_second=rate
        )
    else:
        where, as_of = _replay_filter(body, now=now)
        count = await ctx.db.write(
            replay_matching,
            tenant_id=tenant_id,
            where=where,
            as_of=as_of,
            now=now,
            rate_per_second=rate,
        )
    if count.replayed:
        ctx.nudge()
    return json_response(_render_count(count))


def _render_count(count: ReplayCount) -> dict[str, object]:
    return {
        "matched": count.matched,
        "replayed": count.replayed,
        "not_replayed": {"open": count.open, "schedule_deleted": count.schedule_deleted},
    }


def _list_query() -> tuple[RunFilter, int, Position | None]:
    errors: list[FieldError] = []
    try:
        page = page_request(_CURSOR_KIND)
        limit, before = page.limit, number_and_id_position(page, id_prefix="run_")
    except ValidationError as error:
        errors.extend(error.errors)
        limit, before = 0, None
    unknown = sorted(set(request.args) - {*_FILTER_FIELDS, "limit", "cursor"})
    for name in unknown:
        errors.append(FieldError(field=name, message="is not a filter of this list"))
    args: dict[str, object] = {k: request.args[k] for k in _FILTER_FIELDS[1:] if k in request.args}
    if "http_status" in args:
        text = str(args["http_status"])
        # Three digits at most: int() of thousands of digits raises, and none is a status.
        whole = text.isascii() and text.isdigit() and len(text) <= 3
        args["http_status"] = int(text) if whole else text
    args["state"] = request.args.getlist("state")
    where = run_filter(args, errors, prefix="")
    if errors:
        raise ValidationError(errors)
    return where, limit, before


def run_filter(values: Mapping[str, object], errors: list[FieldError], *, prefix: str) -> RunFilter:
    """The filter these values describe; appends one FieldError per bad value (fields
    named with ``prefix``)."""
    states = values.get("state")
    if states is None:
        states = []
    if isinstance(states, str):
        states = [states]
    known = {state.value for state in RunState}
    chosen: set[RunState] = set()
    if not isinstance(states, list) or not all(isinstance(s, str) for s in states):
        errors.append(FieldError(field=f"{prefix}state", message="must be a list of run states"))
    else:
        for text in states:
            if text in known:
                chosen.add(RunState(text))
            else:
                errors.append(
                    FieldError(
                        field=f"{prefix}state",
                        message=f"unknown run state {text!r}; one of {', '.join(sorted(known))}",
                    )
                )
    schedule_id = values.get("schedule_id")
    if schedule_id is not None and (not isinstance(schedule_id, str) or not schedule_id):
        errors.append(FieldError(field=f"{prefix}schedule_id", message="must be a schedule id"))
        schedule_id = None
    since = _instant(values.get("since"), f"{prefix}since", errors)
    until = _instant(values.get("until"), f"{prefix}until", errors)
    if since is not None and until is not None and until <= since:
        errors.append(FieldError(field=f"{prefix}until", message="must be later than since"))
    status = values.get("http_status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599
    ):
        errors.append(
            FieldError(field=f"{prefix}http_status", message="must be an HTTP status, 100 to 599")
        )
        status = None
    return RunFilter(
        states=frozenset(chosen),
        schedule_id=schedule_id if isinstance(schedule_id, str) else None,
        since=since,
        until=until,
        http_status=status if isinstance(status, int) else None,
    )


def _instant(value: object, field: str, errors: list[FieldError]) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError as error:
            errors.append(FieldError(field=field, message=str(error)))
            return None
    errors.append(FieldError(field=field, message="must be an RFC 3339 date-time string"))
    return None


def _run_ids(body: dict[str, object]) -> list[str]:
    errors = [
        FieldError(field=k, message="is not a field of a replay") for k in body if k != "run_ids"
    ]
    ids = body["run_ids"]
    if (
        not isinstance(ids, list)
        or not ids
        or len(ids) > MAX_REPLAY_IDS
        or not all(isinstance(i, str) and i for i in ids)
    ):
        errors.append(
            FieldError(field="run_ids", message=f"must be a list of 1 to {MAX_REPLAY_IDS} run ids")
        )
    if errors:
        raise ValidationError(errors)
    return [str(i) for i in ids] if isinstance(ids, list) else []


def _replay_filter(body: object, *, now: int) -> tuple[RunFilter, int]:
    if not isinstance(body, dict):
        raise ValidationError.single(
            "body", 'must be {"run_ids": [...]} or {"filter": {...}, "as_of": "<instant>"}'
        )
    errors = [
        FieldError(
            field=k,
            message="send either run_ids or a filter, not both"
            if k == "run_ids"
            else "is not a field of a replay",
        )
        for k in body
        if k not in ("filter", "as_of")
    ]
    where = RunFilter()
    values = body.get("filter")
    if not isinstance(values, dict):
        errors.append(
            FieldError(field="filter", message="send either run_ids or a filter object and as_of")
        )
    else:
        for name in sorted(set(values) - set(_FILTER_FIELDS)):
            errors.append(FieldError(field=f"filter.{name}", message="is not a run filter"))
        for name in sorted(k for k, v in values.items() if v is None and k in _FILTER_FIELDS):
            errors.append(FieldError(field=f"filter.{name}", message="is null; leave it out"))
        where = run_filter(values, errors, prefix="filter.")
    as_of = _instant(body.get("as_of"), "as_of", errors)
    if "as_of" not in body or body["as_of"] is None:
        errors.append(FieldError(field="as_of", message="is required with a filter"))
    elif as_of is not None and as_of > now:
        errors.append(
            FieldError(
                field="as_of",
                message="must not be in the future: runs replayed now would match again",
            )
        )
    if errors:
        raise ValidationError(errors)
    return where, as_of if as_of is not None else now
