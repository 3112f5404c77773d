"""``/v1/signing-secrets``: a tenant rotates the secret its deliveries are signed with.

- ``GET`` lists the active secrets, masked (``whsec_…a1b2``), newest first, with expiry.
- ``POST …/rotate {"overlap_seconds"}`` (default 86400, 0 to replace at once) answers
  the new secret whole, this once; the others keep signing until the overlap ends, so a
  receiver can switch without one failed verification.
- ``DELETE …/{id}`` expires one secret now (a leak); the last active one stays (409).
Rules: :mod:`appliance.store.tenants`; ADR 0032.
"""

from __future__ import annotations

from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.routing import BaseConverter

from appliance.api.auth import authenticate_caller, read_as_tenant
from appliance.api.bodies import json_response, read_json
from appliance.api.context import context
from appliance.core.instants import format_instant
from appliance.store.tenants import (
    SigningSecret,
    expire_signing_secret,
    list_signing_secrets,
    parse_overlap,
    rotate_signing_secret,
)


class SecretIdConverter(BaseConverter):
    """Only ``sec_`` ids: ``/v1/signing-secrets/rotate`` is not a secret."""

    regex = "sec_[0-9A-Za-z]{1,64}"


def register(app: QuartTrio) -> None:
    app.url_map.converters["secret_id"] = SecretIdConverter
    app.add_url_rule("/v1/signing-secrets", view_func=list_secrets, methods=["GET"])
    app.add_url_rule("/v1/signing-secrets/rotate", view_func=rotate_secret, methods=["POST"])
    app.add_url_rule(
        "/v1/signing-secrets/<secret_id:secret_id>", view_func=expire_secret, methods=["DELETE"]
    )


async def list_secrets() -> Response:
    now = context().clock.now_ms()
    secrets = await read_as_tenant(
        lambda conn, tenant_id: list_signing_secrets(conn, tenant_id=tenant_id, now=now)
    )
    return json_response({"items": [render_secret(s) for s in secrets]})


async def rotate_secret() -> Response:
    caller = await authenticate_caller()
    sent = await request.get_data(cache=True, as_text=False, parse_form_data=False)
    overlap_s = parse_overlap(await read_json() if sent else {})
    ctx = context()
    secret = await ctx.db.write(
        rotate_signing_secret,
        tenant_id=caller.tenant_id,
        overlap_ms=overlap_s * 1000,
        now=ctx.clock.now_ms(),
        actor=caller.actor,
    )
    return json_response(render_secret(secret) | {"secret": secret.secret}, status=201)


async def expire_secret(secret_id: str) -> Response:
    caller = await authenticate_caller()
    ctx = context()
    secret = await ctx.db.write(
        expire_signing_secret,
        tenant_id=caller.tenant_id,
        secret_id=secret_id,
        now=ctx.clock.now_ms(),
        actor=caller.actor,
    )
    return json_response(render_secret(secret))


def render_secret(secret: SigningSecret) -> dict[str, object]:
    return {
        "id": secret.id,
        "masked": secret.masked,
        "created_at": format_instant(secret.created_at),
        "expires_at": None if secret.expires_at is None else format_instant(secret.expires_at),
    }
