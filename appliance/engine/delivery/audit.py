"""The boot-time audit of live schedules against the address policy.

An operator who restarts with a narrower policy (``serve --allow-target 127.0.0.0/8`` once,
plain ``serve`` later) turns every later delivery of the affected schedules into a failed
run (``destination_blocked``, never retried). At boot the appliance says so, once, with the
count and an example, instead of leaving the operator to find the failed runs.

Host names are resolved once each (bounded count and time); a name that does not resolve
is not counted: its deliveries fail for another reason, which their attempts record.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import trio

from appliance.core.addresses import (
    AddressPolicy,
    IPAddress,
    ascii_host,
    check_target_url,
    parse_ip_literal,
)
from appliance.engine.delivery.connect import blocked_message, resolve_host
from appliance.engine.delivery.exchange import DeliveryFailed
from appliance.errors import ValidationError

log = logging.getLogger("steeple")

MAX_HOSTS_RESOLVED = 200
RESOLVE_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    schedules: int  # active schedules whose destination the policy refuses
    example: str  # one refused target URL ("" when none)


async def refused_destinations(
    targets: list[tuple[str, int]],
    policy: AddressPolicy,
    *,
    resolve: Callable[[str], Awaitable[list[IPAddress]]] = resolve_host,
) -> Refused:
    """Of ``targets`` (target URL, how many active schedules use it), those refused."""
    refused, example = 0, ""
    verdicts: dict[str, bool] = {}
    for url, count in targets:
        host = ascii_host(urlsplit(url).hostname or "")
        if host not in verdicts:
            verdicts[host] = await _refused(url, host, policy, resolve, len(verdicts))
        if verdicts[host]:
            refused += count
            example = example or url
    return Refused(schedules=refused, example=example)


async def _refused(
    url: str,
    host: str,
    policy: AddressPolicy,
    resolve: Callable[[str], Awaitable[list[IPAddress]]],
    resolved_so_far: int,
) -> bool:
    try:
        check_target_url(url, policy)
    except ValidationError:
        return True
    if parse_ip_literal(host) is not None or resolved_so_far >= MAX_HOSTS_RESOLVED:
        return False
    with trio.move_on_after(RESOLVE_TIMEOUT_S):
        try:
            addresses = await resolve(host)
        except DeliveryFailed:
            return False
        return blocked_message(policy, host, addresses) is not None
    return False


def report(refused: Refused) -> None:
    """One warning line when any active schedule is refused, else nothing."""
    if refused.schedules:
        log.warning(
            "%d active schedules target destinations the address policy refuses (e.g. %s):"
            " their deliveries fail as destination_blocked. Allow the range with"
            " allow_targets in steeple.toml (or --allow-target CIDR) and restart",
            refused.schedules,
            refused.example,
        )
