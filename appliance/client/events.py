"""``steeple events [--follow]``: the tenant's event feed, by cursor or live.

Rules of the follow loop (``GET /v1/events/stream``, Server-Sent Events):
1. Every reconnect sends ``Last-Event-ID`` with the ``seq`` of the last event shown (or
   ``--after``): the appliance sends what was missed, then live events — nothing is shown
   twice, nothing is skipped, across a dropped connection or an appliance restart.
2. A stream that ends or is cut off, an appliance that does not answer, a 429 (stream
   cap) or a 5xx is waited out and retried: the server's ``retry:`` at first, doubling
   on each failure in a row up to MAX_BACKOFF_S.
3. Any other refusal (401 revoked key, 403 suspended tenant, 422 bad filter) ends the
   loop with that ApiProblem: retrying cannot fix it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from appliance.client.http import ApiProblem, Client, ClientError, JsonObject, JsonValue
from appliance.client.output import Shown, cell
from appliance.client.pages import PAGE_MAX

STREAM_PATH = "/v1/events/stream"
DEFAULT_RETRY_MS = 1000  # the appliance announces its own with `retry:`
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One dispatched SSE message."""

    id: str | None
    event: str
    data: str


@dataclass(slots=True)
class SseParser:
    """The event-stream format (WHATWG HTML, "Server-sent events"), one line at a time:
    ``feed`` answers a Message when a blank line ends one with data; comments
    (``: heartbeat``) and unknown fields are ignored; ``retry`` keeps the last valid one."""

    retry_ms: int | None = None
    _id: str | None = None
    _event: str = ""
    _data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> Message | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Message | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return Message(id=self._id, event=event or "message", data="\n".join(data))


def event_params(types: Sequence[str], schedule_id: str | None) -> dict[str, str | list[str]]:
    params: dict[str, str | list[str]] = {"type": list(types)} if types else {}
    return params | ({"schedule_id": schedule_id} if schedule_id else {})


def list_events(
    client: Client,
    *,
    after: int,
    types: Sequence[str],
    schedule_id: str | None,
    limit: int,
    every_page: bool,
) -> Shown:
    """Events after ``after``, oldest first: one page, or every page up to now."""
    params = event_params(types, schedule_id)
    items: list[JsonValue] = []
    cursor = after
    while True:
        size = PAGE_MAX if every_page else limit
        page = client.get("/v1/events", params={**params, "after": cursor, "limit": size})
        found = page.object().get("items")
        batch = found if isinstance(found, list) else []
        items.extend(batch)
        following = page.object().get("next_cursor")
        cursor = following if isinstance(following, int) else cursor
        if not every_page or len(batch) < size or not isinstance(following, int):
            break
    document: JsonObject = {"items": items, "next_cursor": cursor}
    text = "\n".join(event_line(e) for e in items if isinstance(e, dict)) or "(none)"
    notes = (f"more: --after {cursor}",) if not every_page and len(items) == limit else ()
    return Shown(document=document, text=text, notes=notes)


def event_line(event: JsonObject) -> str:
    """``#12  2026-08-06T03:00:00Z  schedule.run.succeeded  sch_…  run_…  by api_key:key_…``"""
    actor = event.get("actor")
    by = f"by {cell(actor.get('kind'))}:{cell(actor.get('id'))}" if isinstance(actor, dict) else ""
    parts = [
        f"#{cell(event.get('seq'))}",
        cell(event.get("occurred_at")),
        cell(event.get("type")),
        *(cell(event[k]) for k in ("schedule_id", "run_id") if isinstance(event.get(k), str)),
        by,
    ]
    return "  ".join(p for p in parts if p)


@dataclass(kw_only=True)
class Follower:
    """The follow loop (rules above). ``show`` gets each event, ``notice`` each reconnect
    (for stderr), ``sleep`` the waits (seconds); ``connections`` counts streams opened."""

    client: Client
    params: dict[str, str | list[str]]
    last_seq: int | None
    show: Callable[[JsonObject], None]
    notice: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep
    connections: int = 0
    _retry_ms: int = DEFAULT_RETRY_MS
    _failures: int = 0

    def run(self, *, streams: int | None = None) -> None:
        """Follow until interrupted (or, for tests, until ``streams`` have ended)."""
        while streams is None or self.connections < streams:
            wait = self.run_once()
            if streams is not None and self.connections >= streams:
                return
            self.sleep(wait)

    def run_once(self) -> float:
        """Open one stream and show its events until it ends; the seconds to wait before
        the next. Raises the ApiProblems rule 3 names."""
        headers = {"Last-Event-ID": str(self.last_seq)} if self.last_seq is not None else {}
        try:
            with self.client.stream(STREAM_PATH, params=self.params, headers=headers) as lines:
                self.connections += 1
                self._failures = 0
                self._read(lines)
            reason = "the appliance ended the stream"
        except ApiProblem as problem:
            if problem.status != 429 and problem.status < 500:
                raise
            reason = problem.summary
        except ClientError as exc:
            reason = str(exc)
        self._failures += 1
        wait = min(MAX_BACKOFF_S, self._retry_ms / 1000 * 2.0 ** (self._failures - 1))
        self.notice(f"{reason}; reconnecting in {wait:g} s after #{self.last_seq or 0}")
        return wait

    def _read(self, lines: Iterator[str]) -> None:
        parser = SseParser()
        for line in lines:
            message = parser.feed(line)
            if parser.retry_ms is not None:
                self._retry_ms = parser.retry_ms
            if message is None:
                continue
            try:
                event: JsonValue = json.loads(message.data)
            except ValueError as exc:
                raise ClientError(f"event {message.id} is not JSON") from exc
            if isinstance(event, dict):
                self.show(event)
            if message.id is not None and message.id.isdigit():
                self.last_seq = int(message.id)


def event_shown(event: JsonObject) -> Shown:
    return Shown(document=event, text=event_line(event))
