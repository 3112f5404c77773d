"""``GET /v1/runs/{id}/curl?signed=now|as_sent``: a run's request as a ready ``curl``
command line, so a tenant can reproduce a delivery against their receiver
(docs/receiver.md, "Resend, curl and the dedupe test").

- JSON, like every answer of the API: ``command`` (one shell-quoted line), ``argv`` (the
  same, split), ``signed``, ``signed_at``, ``valid_until`` (the end of the receiver's
  300 s tolerance), ``attempt`` and ``masked`` (the tenant headers whose values were
  masked, :mod:`appliance.core.curl`).
- ``signed=now`` (the default) signs with the current secrets at now. It mints a valid
  signature, which only a replay could make Steeple send, so it needs a ``write`` key;
  ``as_sent`` reproduces the last attempt's signature headers and needs only ``read``.
- The request is built by :func:`appliance.core.delivery.build_request`, the dispatcher's
  builder, with the same marking header for a resend copy.
"""

from __future__ import annotations

from quart import Response, request
from quart_trio import QuartTrio

from appliance.api.auth import authenticate
from appliance.api.bodies import json_response
from appliance.api.context import context
from appliance.core.curl import BodyNotShellSafe, curl_command
from appliance.core.instants import format_instant
from appliance.core.signing import SignatureError
from appliance.errors import Conflict, ValidationError
from appliance.receiver import TOLERANCE_S
from appliance.store.reproduce import RunRequest, run_request

_SIGNED = ("now", "as_sent")


def register(app: QuartTrio) -> None:
    app.add_url_rule("/v1/runs/<run_id:run_id>/curl", view_func=run_curl, methods=["GET"])


async def run_curl(run_id: str) -> Response:
    signed = request.args.get("signed", "now")
    as_sent = signed == "as_sent"
    tenant_id = await authenticate(write=not as_sent)
    if signed not in _SIGNED:
        raise ValidationError.single(
            "signed",
            '"now" signs with your current secrets now; "as_sent" reproduces the last'
            " attempt's signature",
        )
    ctx = context()
    parts = await ctx.db.read(
        run_request, tenant_id=tenant_id, run_id=run_id, as_sent=as_sent, now=ctx.clock.now_ms()
    )
    return json_response(_render(parts, signed=signed, user_agent=f"Steeple/{ctx.version}"))


def _render(parts: RunRequest, *, signed: str, user_agent: str) -> dict[str, object]:
    try:
        built = parts.build(user_agent=user_agent)
        command = curl_command(
            built,
            tenant_headers=[name for name, _ in parts.headers],
            timeout_seconds=parts.timeout_seconds,
        )
    except SignatureError:
        raise Conflict("you have no active signing secret; rotate one in first") from None
    except BodyNotShellSafe as exc:
        raise Conflict(f"{exc}: no command line can carry it") from None
    return {
        "command": command.line,
        "argv": list(command.argv),
        "signed": signed,
        "signed_at": format_instant(parts.signed_at_s * 1000),
        "valid_until": format_instant((parts.signed_at_s + TOLERANCE_S) * 1000),
        "attempt": parts.attempt,
        "masked": list(command.masked),
    }
