"""The write-time destination check: the static URL rules, then every address the host
resolves to, judged by the same policy as at connect time.

Rules:
- What a tenant typed may be judged in words they can use: a scheme, a port, an IP
  literal, a host name that names this machine (``check_target_url``'s messages).
- What the *network* says is not a tenant's to read: when a name resolves to an address
  the policy refuses, does not resolve, or resolves too slowly, the tenant gets one generic
  refusal (``connect.refusal``, the words a connect-time refusal uses too) — the same for
  all three, so it neither names an internal address nor tells which internal names
  exist — and the operator's log gets the detail.
- It fails closed: a name that does not resolve in :data:`RESOLVE_TIMEOUT_S` is refused.
  The same check runs again at every connection (``engine.delivery.connect``).
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import trio

from appliance.core.addresses import (
    AddressPolicy,
    IPAddress,
    ascii_host,
    check_target_url,
    parse_ip_literal,
)
from appliance.engine.delivery.connect import Resolver, blocked_message, refusal, resolve_host
from appliance.engine.delivery.exchange import DeliveryFailed
from appliance.errors import ValidationError

log = logging.getLogger(__name__)

TARGET_FIELD = "target_url"
RESOLVE_TIMEOUT_S = 5.0


async def check_destination(
    policy: AddressPolicy,
    url: str,
    *,
    resolve: Resolver = resolve_host,
    resolve_timeout_s: float = RESOLVE_TIMEOUT_S,
) -> None:
    """Raises ValidationError (field ``target_url``) when Steeple may not deliver to ``url``."""
    check_target_url(url, policy)
    host = ascii_host(urlsplit(url).hostname or "")
    if parse_ip_literal(host) is not None:
        return  # judged by check_target_url already
    addresses = await _resolve(host, resolve, resolve_timeout_s)
    detail = blocked_message(policy, host, addresses) if isinstance(addresses, list) else addresses
    if detail is not None:
        log.warning("target_url refused: %s", detail)
        raise ValidationError.single(TARGET_FIELD, refusal(host))


async def _resolve(host: str, resolve: Resolver, timeout_s: float) -> list[IPAddress] | str:
    """The host's addresses, or why there are none (for the operator's log)."""
    with trio.move_on_after(timeout_s):
        try:
            addresses = await resolve(host)
        except DeliveryFailed as exc:
            return f"{exc.message}; Steeple refuses destinations it cannot resolve"
        return addresses or f"host {host!r} has no addresses"
    return f"looking up host {host!r} took longer than {timeout_s:g} s"
