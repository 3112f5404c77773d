"""``steeple apply`` and ``steeple export`` over the API (docs/schedules-in-git.md).

Rules this module guards:

- Apply sends the file's items to ``POST /v1/schedules/apply`` in one request: the
  appliance decides the plan, all or nothing. A 422's errors, by item ``index`` and
  field, are named by the file's lines (:class:`FileRefused`), every one of them.
- The plan prints as a diff: ``+`` create, ``~`` change with a line per field (old →
  new; whether the timing changes), ``-`` delete, ``=`` the unchanged count; "nothing to
  change" when nothing does.
- Export writes every keyed schedule as the API answers it, read-only fields left out,
  and never a secret: each secret-bearing header's value is written as the API's mask,
  which an apply reads as "keep the stored value" — so export then apply changes
  nothing. A schedule without a key is written commented out, with the reason: apply
  never touches those, so an export must not make them look managed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from appliance.client.http import ApiProblem, Client, JsonObject, JsonValue
from appliance.client.schedules_file import FileItem, FileProblem, FileRefused, dump
from appliance.core.secret_headers import MASK, looks_secret

PATH: Final = "/v1/schedules/apply"
READ_ONLY: Final = ("id", "version", "created_at", "updated_at", "status", "next_runs", "warnings")
_PAGE: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    plan: JsonObject  # the API's answer (ApplyPlan)
    text: str  # the plan as a diff, for people


def apply_items(
    client: Client, items: Sequence[FileItem], *, prune: bool, dry_run: bool
) -> Applied:
    """Apply (or, ``dry_run``, plan) ``items``; FileRefused with the problems by line."""
    body: JsonObject = {
        "schedules": [_json(item.document) for item in items],
        "prune": prune,
        "dry_run": dry_run,
    }
    try:
        plan = client.post(PATH, json=body).object()
    except ApiProblem as problem:
        if problem.status != 422 or not problem.errors:
            raise
        raise FileRefused(refusals(problem, items)) from None
    return Applied(plan=plan, text=render_plan(plan, dry_run=dry_run, items=items))


def refusals(problem: ApiProblem, items: Sequence[FileItem]) -> list[FileProblem]:
    """A 422's errors as the file's problems: an item's at the line of its field."""
    found = []
    for error in problem.errors:
        item = items[error.index] if error.index is not None and error.index < len(items) else None
        line = item.line_of(error.field) if item is not None else None
        found.append(FileProblem(line=line, field=error.field, message=error.message))
    return found


def render_plan(plan: JsonObject, *, dry_run: bool, items: Sequence[FileItem] = ()) -> str:
    """The plan as a diff for people, ending with a line of counts. A create shows what
    it will send and when, from its file item (``items``)."""
    lines: list[str] = []
    documents = {item.key: item.document for item in items}
    steps = plan.get("items")
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict):
            lines.extend(_step_lines(step, documents))
    counts = plan.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    unkeyed = counts.get("unkeyed", 0)
    if counts.get("unchanged"):
        lines.append(f"= {counts['unchanged']} unchanged")
    if not plan.get("changed"):
        lines.append("nothing to change")
    elif dry_run:
        lines.append(f"would {_summary(counts, _VERBS)} (dry run: nothing written)")
    else:
        lines.append(f"applied: {_summary(counts, _DONE)}")
    if unkeyed:
        lines.append(f"{unkeyed} schedule(s) without a key left alone")
    if unlisted := counts.get("unlisted", 0):  # an older appliance does not count them
        lines.append(f"{unlisted} keyed schedule(s) not in the file kept (--prune deletes them)")
    return "\n".join(lines) + "\n"


_VERBS: Final = {"create": "create", "change": "change", "delete": "delete"}
_DONE: Final = {"create": "created", "change": "changed", "delete": "deleted"}


def _summary(counts: JsonObject, verbs: dict[str, str]) -> str:
    return ", ".join(f"{verb} {counts.get(action, 0)}" for action, verb in verbs.items())


def _step_lines(step: JsonObject, documents: Mapping[str, dict[str, object]]) -> list[str]:
    action, key = step.get("action"), step.get("key")
    ident = f" ({step['schedule_id']})" if step.get("schedule_id") else ""
    if action == "create":
        sent = [_created(documents[key])] if isinstance(key, str) and key in documents else []
        return [f"+ {key}", *sent, *_warning_lines(step)]
    if action == "delete":
        return [f"- {key}{ident}"]
    if action != "change":
        return []
    lines = [f"~ {key}{ident}"]
    changes = step.get("changes")
    timing_noted = False
    for change in changes if isinstance(changes, list) else []:
        if not isinstance(change, dict):
            continue
        line = f"  {change.get('field')}: {_shown(change.get('old'))} → {_shown(change.get('new'))}"
        if step.get("timing_changed") and not timing_noted and _is_timing(change.get("field")):
            line += " (timing changes: occurrences follow the new timing from now)"
            timing_noted = True
        lines.append(line)
    return [*lines, *_warning_lines(step)]


def _created(document: dict[str, object]) -> str:
    """``  GET https://… cron "0 3 * * *" in Europe/Berlin``: a create in one line."""
    method = document.get("method") or "POST"
    when = next(
        (
            f"{name} {json.dumps(document[name], ensure_ascii=False)}"
            for name in ("cron", "every", "every_seconds", "at")
            if document.get(name) is not None
        ),
        "",
    )
    zone = f" in {document['timezone']}" if document.get("timezone") else ""
    return f"  {method} {document.get('target_url')} {when}{zone}".rstrip()


def _warning_lines(step: JsonObject) -> list[str]:
    found = step.get("warnings")
    items = found if isinstance(found, list) else []
    return [f"  warning: {w.get('message')}" for w in items if isinstance(w, dict)]


_TIMING_FIELDS: Final = ("cron", "at", "every_seconds", "timezone", "start_at", "end_at", "dst")


def _is_timing(field: JsonValue) -> bool:
    return isinstance(field, str) and field in _TIMING_FIELDS


def _shown(value: JsonValue) -> str:
    return "(none)" if value is None else json.dumps(value, ensure_ascii=False)


def _json(document: dict[str, object]) -> JsonValue:
    """A file item's document as the JSON it is (tomllib gives JSON's types only)."""
    value: JsonValue = json.loads(json.dumps(document))
    return value


# Export ---------------------------------------------------------------------------------

HEADER: Final = """\
# Steeple schedules, written by `steeple export`; apply with `steeple apply -f FILE`.
# Secret-bearing header values are written as {mask}: an apply keeps the stored value.
# To set one from the environment instead, write "${{NAME}}" (e.g. "Bearer ${{TOKEN}}").
"""


def export_items(client: Client) -> tuple[list[dict[str, object]], list[JsonObject]]:
    """The tenant's keyed schedules as file items (secrets masked), and the documents of
    those without a key (which apply never touches)."""
    keyed, unkeyed = [], []
    for document in list_schedules(client):
        if document.get("key"):
            keyed.append(exported(document))
        else:
            unkeyed.append(document)
    return keyed, unkeyed


def export_text(client: Client) -> str:
    """Every schedule of the tenant as a schedules file (keyed ones as tables, the rest
    commented out)."""
    keyed, unkeyed = export_items(client)
    parts = [HEADER.format(mask=MASK)]
    if keyed:
        parts.append(dump(keyed))
    parts.extend(_commented(document) for document in unkeyed)
    return "\n".join(parts)


def list_schedules(client: Client) -> list[JsonObject]:
    """Every live schedule, page after page."""
    found: list[JsonObject] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": _PAGE}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/schedules", params=params).object()
        items = page.get("items")
        found.extend(i for i in (items if isinstance(items, list) else []) if isinstance(i, dict))
        next_cursor = page.get("next_cursor")
        if not isinstance(next_cursor, str):
            return found
        cursor = next_cursor


def exported(document: JsonObject) -> dict[str, object]:
    """A schedule's document as a file item: read-only fields out, secrets masked."""
    item: dict[str, object] = {k: v for k, v in document.items() if k not in READ_ONLY}
    headers = item.get("headers")
    if isinstance(headers, dict):
        item["headers"] = {n: MASK if looks_secret(n) else v for n, v in headers.items()}
    return item


def _commented(document: JsonObject) -> str:
    """A schedule without a key, commented out: apply leaves it alone."""
    note = (
        f"# {document.get('id')} has no key, so apply leaves it alone. To manage it here,"
        f" give it one (steeple schedules edit {document.get('id')} --key …) and export again.\n"
    )
    table = dump([exported(document)])
    return note + "".join(f"# {line}\n" for line in table.splitlines())
