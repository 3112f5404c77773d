"""A schedule's ``key`` is unique among its tenant's live schedules.

Rules this module guards (docs/schedules.md, "Keys"):

- A create or an edit that would give a key another live schedule of the tenant holds is
  refused with :class:`KeyTaken` (the API's 409 ``key-taken``, naming the key and the
  schedule holding it) before anything is written; the partial unique index
  ``schedules_tenant_key`` (migration 0023) is the guarantee behind this check. A deleted
  schedule's key is free again.
- A batch giving one key to two of its items is refused the same way, naming both items:
  all or nothing, as every other problem of a batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from appliance.errors import Conflict
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection


class KeyTaken(Conflict):
    """Another live schedule of the tenant (or another item of the batch) has the key."""

    def __init__(self, key: str, *, holder: str, index: int | None = None) -> None:
        where = "" if index is None else f"item {index}: "
        super().__init__(
            f"{where}the key {key!r} is taken by {holder}; choose another key or edit that schedule"
        )
        self.key = key
        self.index = index


def check_keys_free(
    conn: Connection,
    *,
    tenant_id: str,
    keys: Sequence[str | None],
    schedule_id: str | None = None,
    batch: bool = False,
) -> None:
    """:class:`KeyTaken` unless each non-null key of ``keys`` (in a batch's order) is held
    by no other live schedule of the tenant than ``schedule_id`` (an edit's own) and by
    no earlier item. ``batch``: name each key's item index."""
    seen: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key is None:
            continue
        at = index if batch else None
        if key in seen:
            raise KeyTaken(key, holder=f"item {seen[key]} of this batch", index=at)
        seen[key] = index
        holder = _holder(conn, tenant_id, key)
        if holder is not None and holder != schedule_id:
            raise KeyTaken(key, holder=holder, index=at)


def _holder(conn: Connection, tenant_id: str, key: str) -> str | None:
    row = conn.execute(
        "SELECT id FROM schedules WHERE tenant_id = ? AND key = ? AND deleted_at IS NULL",
        (tenant_id, key),
    ).fetchone()
    return None if row is None else rows.text(row[0])
