"""Queries on the append-only ``events`` table."""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from appliance.core.events import Actor, Event, EventType, JsonValue
from appliance.core.ids import new_id, new_ids
from appliance.core.notifications import NOTIFIED_TYPES
from appliance.store.infra import rows
from appliance.store.infra.connection import Batched, Connection, Rows, unnested
from appliance.store.notifications import enqueue_notification

# Events not scoped to a tenant (e.g. clock jumps) belong to this pseudo tenant.
SYSTEM_TENANT = "system"

_COLUMNS = rows.Columns(
    Event,
    ["seq", "id", "tenant_id", "type", "schedule_id", "run_id", "occurred_at", "data", "actor"],
    convert={
        "type": rows.enum_of(EventType),
        "data": lambda value: json.loads(rows.text(value)),
        "actor": lambda value: None if value is None else Actor.parse(rows.text(value)),
    },
)
_SELECT = f"SELECT {_COLUMNS.select} FROM events"


_INTO = "INSERT INTO events (id, tenant_id, type, schedule_id, run_id, occurred_at, data, actor)"
_INSERT = f"{_INTO} VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
# Many events: on PostgreSQL one statement over one array per column, the rows inserted
# (and their ``seq`` drawn) in the arrays' order, as ``executemany`` would one by one.
_INSERT_ROWS: Final = Batched(
    sqlite=_INSERT,
    postgres=f"{_INTO} SELECT "
    + unnested(
        "id text, tenant_id text, type text, schedule_id text, run_id text,"
        " occurred_at bigint, data text, actor text"
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An event to append (:func:`append_events`)."""

    tenant_id: str
    type: EventType
    now: int
    schedule_id: str | None = None
    run_id: str | None = None
    data: Mapping[str, JsonValue] | None = None
    actor: Actor | None = None


def append_event(
    conn: Connection,
    *,
    tenant_id: str,
    type: EventType,
    now: int,
    schedule_id: str | None = None,
    run_id: str | None = None,
    data: Mapping[str, JsonValue] | None = None,
    actor: Actor | None = None,
) -> int:
    """Append one event; returns its sequence number."""
    event = NewEvent(
        tenant_id=tenant_id, type=type, now=now, schedule_id=schedule_id, run_id=run_id,
        data=data, actor=actor,
    )  # fmt: skip
    seq: int = conn.execute(f"{_INSERT} RETURNING seq", _row(event)).fetchone()[0]
    if type in NOTIFIED_TYPES:  # its notification commits with it (store/notifications.py)
        for stored in _COLUMNS.all(conn.execute(f"{_SELECT} WHERE seq = ?", (seq,))):
            enqueue_notification(conn, stored, now=now)
    return seq


def append_events(conn: Connection, events: Sequence[NewEvent]) -> None:
    """Append events in their order: one statement per stretch of events that notify
    nobody (``executemany`` on SQLite, one ``INSERT … SELECT unnest(…)`` on PostgreSQL);
    an event of :data:`NOTIFIED_TYPES` goes through :func:`append_event` (its
    notification reads the stored row back)."""
    plain: list[NewEvent] = []
    for event in events:
        if event.type not in NOTIFIED_TYPES:
            plain.append(event)
            continue
        if plain:
            _INSERT_ROWS.run(conn, [_row(e) for e in plain])
            plain = []
        append_event(
            conn, tenant_id=event.tenant_id, type=event.type, now=event.now,
            schedule_id=event.schedule_id, run_id=event.run_id, data=event.data,
            actor=event.actor,
        )  # fmt: skip
    if plain:
        _INSERT_ROWS.run(conn, [_row(e) for e in plain])


def append_schedule_events(
    conn: Connection,
    *,
    tenant_id: str,
    type: EventType,
    now: int,
    schedule_ids: Sequence[str],
    data: Mapping[str, JsonValue],
    actor: Actor | None = None,
) -> None:
    """Append one event of ``type`` per schedule, in order, with one statement (as
    :func:`append_events`): the rows :func:`append_event` would write one by one (a batch
    create's)."""
    if type in NOTIFIED_TYPES:  # each with its notification
        for schedule_id in schedule_ids:
            append_event(
                conn,
                tenant_id=tenant_id,
                type=type,
                now=now,
                schedule_id=schedule_id,
                data=data,
                actor=actor,
            )
        return
    text = _data_text(data)
    actor_text = None if actor is None else actor.text()
    _INSERT_ROWS.run(
        conn,
        [
            (event_id, tenant_id, str(type), sid, None, now, text, actor_text)
            for event_id, sid in zip(
                new_ids("evt", now, len(schedule_ids)), schedule_ids, strict=True
            )
        ],
    )


def _row(event: NewEvent) -> tuple[str, str, str, str | None, str | None, int, str, str | None]:
    return (
        new_id("evt", event.now),
        event.tenant_id,
        str(event.type),
        event.schedule_id,
        event.run_id,
        event.now,
        _data_text(event.data),
        None if event.actor is None else event.actor.text(),
    )


def _data_text(data: Mapping[str, JsonValue] | None) -> str:
    return json.dumps(dict(data or {}), separators=(",", ":"), sort_keys=True)


def list_events(
    conn: Connection,
    *,
    tenant_id: str,
    after: int = 0,
    limit: int = 100,
    schedule_id: str | None = None,
    types: frozenset[EventType] | None = None,
) -> list[Event]:
    """A tenant's feed: its own events and the ``system`` tenant's (they affect every
    tenant), ``seq > after``, oldest first, at most ``limit``.

    Every page is a merge of bounded index range scans, each in ``seq`` order and limited
    to ``limit`` rows: one per tenant (own, ``system``) and type asked for
    (``events_tenant`` or ``events_tenant_type``), or the schedule's (``events_schedule``).
    One ``IN (…) ORDER BY seq`` would sort every matching row first.
    """
    if schedule_id is not None:
        where = "schedule_id = ? AND tenant_id = ?"
        params: list[object] = [schedule_id, tenant_id]
        scans = [_page(conn, where, params, after, limit, types)]
    else:
        tenants = [tenant_id] if tenant_id == SYSTEM_TENANT else [tenant_id, SYSTEM_TENANT]
        scans = [
            _page(conn, "tenant_id = ? AND type = ?", [tenant, str(t)], after, limit, None)
            for tenant in tenants
            for t in sorted(types or ())
        ] or [_page(conn, "tenant_id = ?", [tenant], after, limit, None) for tenant in tenants]
    # Rows are built only for the page: a scan's rows past it (often the whole ``system``
    # scan) are never stepped to, let alone parsed.
    merged = heapq.merge(*scans, key=lambda row: int(row[0]))  # the first column is seq
    return _COLUMNS.all(itertools.islice(merged, limit))


def latest_seq(conn: Connection) -> int:
    """The sequence number of the newest event (0 when there is none)."""
    row = conn.execute("SELECT max(seq) FROM events").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def newest_feed_seq(conn: Connection, *, tenant_id: str) -> int:
    """The ``seq`` of the newest event of the tenant's feed (its own and the ``system``
    tenant's; 0 when there is none): a page read in the same snapshot shows everything up
    to it, so a stream from there misses nothing and repeats nothing. One backwards step
    of ``events_tenant`` per tenant."""
    tenants = [tenant_id] if tenant_id == SYSTEM_TENANT else [tenant_id, SYSTEM_TENANT]
    newest = 0
    for tenant in tenants:
        row = conn.execute(
            "SELECT seq FROM events WHERE tenant_id = ? ORDER BY seq DESC LIMIT 1", (tenant,)
        ).fetchone()
        if row is not None:
            newest = max(newest, int(row[0]))
    return newest


def events_after(conn: Connection, *, after: int, limit: int) -> list[Event]:
    """Every tenant's events with ``seq > after``, oldest first (the live stream's hub)."""
    return _COLUMNS.all(
        conn.execute(f"{_SELECT} WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit))
    )


def _page(
    conn: Connection,
    where: str,
    params: list[object],
    after: int,
    limit: int,
    types: frozenset[EventType] | None,
) -> Rows:
    """The rows (unbuilt, stepped as they are read) of one bounded scan in ``seq`` order."""
    sql = f"{_SELECT} WHERE {where} AND seq > ?"
    params = [*params, after]
    if types:
        sql += f" AND type IN ({','.join('?' * len(types))})"
        params.extend(str(t) for t in sorted(types))
    return conn.execute(f"{sql} ORDER BY seq LIMIT ?", [*params, limit])
