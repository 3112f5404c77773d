"""Who an event's actor is, in words a reader knows (docs/ui.md, "Pages": ``/events``).

Rules this module guards:

- A web UI user is named by email and an API key by its name — only a user of the
  tenant (or an operator, who may act on any tenant: suspend, resume) and a key of the
  tenant: another tenant's id is never turned into its email or name.
- An actor that is gone (a removed user, a deleted key) or unknown has no name here; the
  caller shows its id. Ids stay the stored truth: this is a label, read at display time.
- One query per kind for a page of events, however many rows name the same actor.
"""

from __future__ import annotations

from collections.abc import Iterable

from appliance.core.events import Actor, ActorKind
from appliance.store.infra import rows
from appliance.store.infra.connection import Connection

OPERATOR_CLI = "operator (command line)"


def actor_names(
    conn: Connection, *, tenant_id: str, actors: Iterable[Actor | None]
) -> dict[Actor, str]:
    """A label for each actor that has one: an email, ``key "name"``, or the CLI's."""
    wanted = {actor for actor in actors if actor is not None}
    names: dict[Actor, str] = {a: OPERATOR_CLI for a in wanted if a.kind is ActorKind.OPERATOR}
    users = sorted(a.id for a in wanted if a.kind is ActorKind.USER)
    for user_id, email in _lookup(
        conn,
        "SELECT id, email FROM users WHERE (tenant_id = ? OR operator = 1) AND id IN",
        tenant_id,
        users,
    ):
        names[Actor.user(user_id)] = email
    keys = sorted(a.id for a in wanted if a.kind is ActorKind.API_KEY)
    for key_id, name in _lookup(
        conn, "SELECT id, name FROM api_keys WHERE tenant_id = ? AND id IN", tenant_id, keys
    ):
        names[Actor.api_key(key_id)] = f"key “{name}”"
    return names


def _lookup(conn: Connection, select: str, tenant_id: str, ids: list[str]) -> list[tuple[str, str]]:
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    found = conn.execute(f"{select} ({marks})", (tenant_id, *ids))
    return [(rows.text(i), rows.text(label)) for i, label in found]
