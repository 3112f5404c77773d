"""``steeple runs get|failed|replay``: runs over ``/v1/runs``, and how a run is shown
(here for the schedule commands' ``runs`` and ``trigger`` too)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from appliance.client.http import Client, JsonObject
from appliance.client.output import Shown, cell, fields, items_of, table
from appliance.client.pages import read_list

RUN_COLUMNS = ["ID", "SCHEDULED FOR", "STATE", "ATTEMPTS", "HTTP", "TRIGGER", "WHY"]
ATTEMPT_COLUMNS = ["#", "STARTED", "OUTCOME", "HTTP", "MS", "ERROR"]


def run_path(run_id: str, action: str = "") -> str:
    return f"/v1/runs/{quote(run_id, safe='')}" + (f"/{action}" if action else "")


def get_run(client: Client, run_id: str) -> Shown:
    run = client.get(run_path(run_id)).object()
    return Shown(document=run, text=run_text(run))


def failed_runs(
    client: Client,
    *,
    schedule_id: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    every_page: bool,
) -> Shown:
    """The dead-letter view: ``GET /v1/runs?state=failed``, newest first."""
    params: dict[str, str] = {"state": "failed"}
    given = {"schedule_id": schedule_id, "since": since, "until": until}
    params |= {name: value for name, value in given.items() if value is not None}
    page = read_list(client, "/v1/runs", params, limit=limit, every_page=every_page)
    more = page.get("next_cursor")
    notes = ("more: --all reads every page",) if isinstance(more, str) and more else ()
    return Shown(document=page, text=run_rows(items_of(page)), notes=notes)


def replay_runs(client: Client, run_ids: Sequence[str]) -> Shown:
    """Deliver these finished runs again, all or none (``POST /v1/runs/replay``)."""
    result = client.post("/v1/runs/replay", json={"run_ids": list(run_ids)}).object()
    return Shown(document=result, text=fields(result))


def run_rows(runs: Sequence[JsonObject]) -> str:
    rows = [
        [
            cell(run.get("id")),
            cell(run.get("scheduled_for")),
            cell(run.get("state")),
            cell(run.get("attempt")),
            cell(run.get("last_status")),
            cell(run.get("trigger")),
            cell(run.get("failure_reason") or run.get("last_error")),
        ]
        for run in runs
    ]
    return table(RUN_COLUMNS, rows)


def run_text(run: JsonObject) -> str:
    """A run's fields, then its attempts as a table (when the answer has them)."""
    text = fields(run, skip=("attempts",))
    attempts = run.get("attempts")
    if isinstance(attempts, list):
        rows = [
            [
                cell(a.get("attempt")),
                cell(a.get("started_at")),
                cell(a.get("outcome")),
                cell(a.get("http_status")),
                cell(a.get("latency_ms")),
                cell(a.get("error")),
            ]
            for a in attempts
            if isinstance(a, dict)
        ]
        text += "\n\nattempts\n" + table(ATTEMPT_COLUMNS, rows)
    return text
