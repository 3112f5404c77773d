"""The event envelope of ``contracts/events/envelope.json``: one rendering, served by
``GET /v1/events`` and its stream and delivered by failure notifications."""

from __future__ import annotations

from appliance.core.events import Event
from appliance.core.instants import format_instant


def render_event(event: Event) -> dict[str, object]:
    """The envelope of ``contracts/events/envelope.json``."""
    return {
        "seq": event.seq,
        "id": event.id,
        "tenant_id": event.tenant_id,
        "type": str(event.type),
        "schedule_id": event.schedule_id,
        "run_id": event.run_id,
        "occurred_at": format_instant(event.occurred_at),
        "actor": None
        if event.actor is None
        else {"kind": str(event.actor.kind), "id": event.actor.id},
        "data": event.data,
    }
