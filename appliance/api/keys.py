"""``/v1/keys``: a tenant issues, lists and revokes its own API keys.

- ``POST /v1/keys {"name", "scope"}`` answers 201 with the key itself, shown this once.
- ``GET /v1/keys`` lists the live keys: id, name, scope, display prefix, created, last
  used — never the key.
- ``DELETE /v1/keys/{id}`` revokes a key at once (its next request answers 401); the
  tenant's last write key cannot be revoked (409 saying why). Another tenant's key id
  answers 404 like a missing one.
"""

from __future__ import annotations

from quart import Response
from quart_trio import QuartTrio

from appliance.api.auth import authenticate_caller, read_as_tenant
from appliance.api.bodies import json_response, read_json
from appliance.api.context import context
from appliance.core.instants import format_instant
from appliance.store.api_keys import (
    ApiKey,
    issue_api_key,
    list_api_keys,
    parse_key_request,
    revoke_api_key,
)


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/keys", view_func=create_key, methods=["POST"])
    app.add_url_rule("/v1/keys", view_func=list_keys, methods=["GET"])
    app.add_url_rule("/v1/keys/<key_id>", view_func=revoke_key, methods=["DELETE"])


async def create_key() -> Response:
    caller = await authenticate_caller()
    name, scope = parse_key_request(await read_json())
    ctx = context()
    issued = await ctx.db.write(
        issue_api_key,
        tenant_id=caller.tenant_id,
        name=name,
        scope=scope,
        now=ctx.clock.now_ms(),
        actor=caller.actor,
    )
    document = render_key(issued.key) | {"api_key": issued.api_key}
    return json_response(document, status=201, headers={"Location": f"/v1/keys/{issued.key.id}"})


async def list_keys() -> Response:
    keys = await read_as_tenant(lambda conn, tenant_id: list_api_keys(conn, tenant_id=tenant_id))
    return json_response({"items": [render_key(key) for key in keys]})


async def revoke_key(key_id: str) -> Response:
    caller = await authenticate_caller()
    ctx = context()
    await ctx.db.write(
        revoke_api_key,
        tenant_id=caller.tenant_id,
        key_id=key_id,
        now=ctx.clock.now_ms(),
        actor=caller.actor,
    )
    return Response(b"", status=204)


def render_key(key: ApiKey) -> dict[str, object]:
    return {
        "id": key.id,
        "name": key.name,
        "scope": str(key.scope),
        "prefix": key.prefix,
        "created_at": format_instant(key.created_at),
        "last_used_at": None if key.last_used_at is None else format_instant(key.last_used_at),
    }
