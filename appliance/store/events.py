"""Queries on the append-only ``events`` table."""

from __future__ import annotations

import json
from collections.abc import Mapping

import apsw

from appliance.core.events import Event, EventType, JsonScalar
from appliance.core.ids import new_id
from appliance.store import rows

# Events not scoped to a tenant (e.g. clock jumps) belong to this pseudo tenant.
SYSTEM_TENANT = "system"

_COLUMNS = rows.Columns(
    Event,
    ["seq", "id", "tenant_id", "type", "schedule_id", "run_id", "occurred_at", "data"],
    convert={"type": rows.enum_of(EventType), "data": lambda value: json.loads(rows.text(value))},
)


def append_event(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    type: EventType,
    now: int,
    schedule_id: str | None = None,
    run_id: str | None = None,
    data: Mapping[str, JsonScalar] | None = None,
) -> int:
    """Append one event; returns its sequence number."""
    conn.execute(
        "INSERT INTO events (id, tenant_id, type, schedule_id, run_id, occurred_at, data)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            new_id("evt", now),
            tenant_id,
            str(type),
            schedule_id,
            run_id,
            now,
            json.dumps(dict(data or {}), separators=(",", ":"), sort_keys=True),
        ),
    )
    return conn.last_insert_rowid()


def list_events(
    conn: apsw.Connection,
    *,
    tenant_id: str,
    after: int = 0,
    limit: int = 100,
    schedule_id: str | None = None,
    types: frozenset[EventType] | None = None,
) -> list[Event]:
    """Events of one tenant with ``seq > after``, oldest first."""
    sql = f"SELECT {_COLUMNS.select} FROM events WHERE tenant_id = ? AND seq > ?"
    params: list[object] = [tenant_id, after]
    if schedule_id is not None:
        sql += " AND schedule_id = ?"
        params.append(schedule_id)
    if types:
        sql += f" AND type IN ({','.join('?' * len(types))})"
        params.extend(str(t) for t in sorted(types))
    sql += " ORDER BY seq LIMIT ?"
    params.append(limit)
    return _COLUMNS.all(conn.execute(sql, params))
