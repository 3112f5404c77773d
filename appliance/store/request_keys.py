"""The ``Idempotency-Key`` cache of schedule creates (docs/architecture.md, "The API").

Rules this module guards:

- A create under a key is remembered for :data:`REQUEST_KEY_TTL_MS` with a hash of the
  request: the same key and body replays the stored response and creates nothing; the
  same key with another body is refused (:class:`RequestKeyReused`).
- The key is looked up again inside the create's own write transaction, so two retries
  racing each other create one schedule.
- Expired keys are ignored on read; :func:`prune_request_keys` only bounds the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from appliance.core.events import Actor
from appliance.core.schedules import Schedule, ScheduleSpec
from appliance.errors import Conflict
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection
from appliance.store.schedules import create_schedule, create_schedules

REQUEST_KEY_TTL_MS: Final = 24 * 3600 * 1000


class RequestKeyReused(Conflict):
    """An ``Idempotency-Key`` was reused with a different request body (-> 422)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredResponse:
    """The response remembered for an ``Idempotency-Key``: status and JSON text."""

    status: int
    body: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Remembered:
    request_hash: str
    status: int
    response: str


_COLUMNS: Final = rows.Columns(
    _Remembered,
    ["request_hash", "status", "response"],
    convert={"request_hash": rows.text, "status": rows.integer, "response": rows.text},
)


def create_schedule_once(
    conn: Connection,
    *,
    tenant_id: str,
    spec: ScheduleSpec,
    request_key: str,
    request_hash: str,
    render: Callable[[Schedule], StoredResponse],
    now: int,
    max_schedules: int | None = None,
    actor: Actor | None = None,
) -> tuple[StoredResponse, bool]:
    """Create under an ``Idempotency-Key``: ``(response, created)``. A live key with the
    same ``request_hash`` returns the remembered response and creates nothing."""

    def create(conn: Connection) -> StoredResponse:
        return render(
            create_schedule(
                conn,
                tenant_id=tenant_id,
                spec=spec,
                now=now,
                max_schedules=max_schedules,
                actor=actor,
            )
        )

    return create_once(
        conn, tenant_id=tenant_id, request_key=request_key, request_hash=request_hash,
        create=create, now=now,
    )  # fmt: skip


def create_schedules_once(
    conn: Connection,
    *,
    tenant_id: str,
    specs: Sequence[ScheduleSpec],
    request_key: str,
    request_hash: str,
    render: Callable[[list[Schedule]], StoredResponse],
    now: int,
    max_schedules: int | None = None,
    actor: Actor | None = None,
) -> tuple[StoredResponse, bool]:
    """A batch create under an ``Idempotency-Key``, all or none: ``(response, created)``
    as :func:`create_schedule_once`'s, the batch's schedules and its remembered response
    written in the one transaction."""

    def create(conn: Connection) -> StoredResponse:
        return render(
            create_schedules(
                conn,
                tenant_id=tenant_id,
                specs=specs,
                now=now,
                max_schedules=max_schedules,
                actor=actor,
            )
        )

    return create_once(
        conn, tenant_id=tenant_id, request_key=request_key, request_hash=request_hash,
        create=create, now=now,
    )  # fmt: skip


def create_once(
    conn: Connection,
    *,
    tenant_id: str,
    request_key: str,
    request_hash: str,
    create: Callable[[Connection], StoredResponse],
    now: int,
) -> tuple[StoredResponse, bool]:
    """``create(conn)``'s response, remembered under ``request_key``: ``(response,
    created)``. A live key with the same ``request_hash`` returns the remembered response
    and runs nothing (a single create's, a batch's)."""
    remembered = recall_request(
        conn, tenant_id=tenant_id, request_key=request_key, request_hash=request_hash, now=now
    )
    if remembered is not None:
        return remembered, False
    response = create(conn)
    conn.execute(
        "INSERT INTO request_keys"
        " (tenant_id, key, request_hash, status, response, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = excluded.request_hash,"
        " status = excluded.status, response = excluded.response,"
        " created_at = excluded.created_at",
        (tenant_id, request_key, request_hash, response.status, response.body, now),
    )
    return response, True


def recall_request(
    conn: Connection, *, tenant_id: str, request_key: str, request_hash: str, now: int
) -> StoredResponse | None:
    """The response remembered for a live ``request_key``, or None. Raises
    :class:`RequestKeyReused` if the key was used with another request."""
    row = conn.execute(
        f"SELECT {_COLUMNS.select} FROM request_keys"
        " WHERE tenant_id = ? AND key = ? AND created_at > ?",
        (tenant_id, request_key, now - REQUEST_KEY_TTL_MS),
    ).fetchone()
    if row is None:
        return None
    remembered = _COLUMNS.one(row)
    if remembered.request_hash != request_hash:
        raise RequestKeyReused(
            "this Idempotency-Key was already used with a different request body"
        )
    return StoredResponse(status=remembered.status, body=remembered.response)


def prune_request_keys(conn: Connection, *, now: int) -> int:
    """Forget ``Idempotency-Key`` records past :data:`REQUEST_KEY_TTL_MS`; returns how many.
    Expired keys are already ignored, so this only bounds the table (for the pruner)."""
    conn.execute("DELETE FROM request_keys WHERE created_at <= ?", (now - REQUEST_KEY_TTL_MS,))
    return conn.changes()
