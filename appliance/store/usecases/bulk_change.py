"""One change applied to several schedules at once: pause (with one note), resume, or run
now — the web UI's selected rows (docs/ui.md, "Pages").

Rules this module guards:

- All or none: every schedule changes in the caller's one write transaction, each by the
  very store function a single change calls (:func:`appliance.store.pauses.pause_schedule`,
  :func:`~appliance.store.pauses.resume_schedule`,
  :func:`appliance.store.usecases.manual.trigger_schedule`), events included; the first
  refusal (a foreign, deleted or unknown id is NotFound) raises and the caller's
  transaction rolls back, so nothing changes.
- Schedules change in the order given (the caller dedupes the ids).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from appliance.core.events import Actor
from appliance.store import pauses
from appliance.store.infra.connection import Connection
from appliance.store.usecases import manual


class Change(enum.StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    RUN = "run"


def change_schedules(
    conn: Connection,
    *,
    tenant_id: str,
    schedule_ids: Sequence[str],
    change: Change,
    now: int,
    actor: Actor,
    note: str | None = None,
) -> None:
    """Apply ``change`` to each of the tenant's ``schedule_ids`` (``note``: a pause's),
    all or none."""
    for schedule_id in schedule_ids:
        if change is Change.RUN:
            manual.trigger_schedule(conn, tenant_id=tenant_id, schedule_id=schedule_id, now=now)
        elif change is Change.PAUSE:
            pauses.pause_schedule(
                conn, tenant_id=tenant_id, schedule_id=schedule_id, now=now, actor=actor, note=note
            )
        else:
            pauses.resume_schedule(
                conn, tenant_id=tenant_id, schedule_id=schedule_id, now=now, actor=actor
            )
