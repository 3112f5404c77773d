"""The per-origin circuit breaker: a receiver that keeps failing is left alone for a while
instead of burning every run's attempts (docs/configuration.md, ``breaker_failures``).

Rules this module guards (pure: time is passed in, state is a value):

- An **origin** is scheme, host and port of a target URL (:func:`origin_of`); runs of all
  tenants and schedules that deliver to it share one breaker.
- A **failure** is an attempt without an HTTP answer (except one the outbound policy
  blocked: that is the address, not the receiver) or answered 429 or 5xx
  (:func:`is_failure`). Any other answer is a success.
- **Open** after ``threshold`` consecutive failures: no request goes to the origin until
  the probe instant; runs due meanwhile wait, not charged an attempt (reason
  ``breaker_open``). At the probe instant exactly one request goes (**half-open**); the
  others wait one more period (the next probe if this one fails). The probe's failure
  re-opens with the wait doubled (from ``first_wait_ms`` up to ``max_wait_ms``); its
  success closes the breaker, and the runs that waited are due at once
  (:func:`appliance.store.breaker.release_waiting`).
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import urlsplit

from appliance.core.retry import TransportFailure

BREAKER_OPEN: Final = "breaker_open"  # the reason a run waits
_PORTS: Final = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerConfig:
    threshold: int = 10  # consecutive failures that open it
    first_wait_ms: int = 10_000
    max_wait_ms: int = 300_000

    def __post_init__(self) -> None:
        if self.threshold < 1:
            raise ValueError(f"threshold must be at least 1, not {self.threshold}")
        if not 0 < self.first_wait_ms <= self.max_wait_ms:
            raise ValueError("0 < first_wait_ms <= max_wait_ms")


@dataclass(frozen=True, slots=True, kw_only=True)
class OriginState:
    failures: int = 0  # consecutive
    open_until: int | None = None  # the probe instant while open; None: closed
    wait_ms: int = 0  # the current open period
    probing: bool = False  # the half-open probe is in flight
    tenants: frozenset[str] = frozenset()  # whose attempts failed in this streak


CLOSED: Final = OriginState()


class Change(enum.StrEnum):
    OPENED = "opened"
    CLOSED = "closed"


@functools.lru_cache(maxsize=4096)  # pure; every delivery asks, of a few target URLs
def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url``, the host in lower case."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port or _PORTS.get(scheme, 0)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def is_failure(status: int | None, failure: TransportFailure | None) -> bool:
    if status is None:
        return failure is not TransportFailure.BLOCKED
    return status == 429 or status >= 500


def admit(state: OriginState, *, now: int) -> tuple[int | None, OriginState]:
    """``(None, state)``: send now (``state`` marks a half-open probe in flight); or
    ``(wait_until, state)``: the run waits until then."""
    if state.open_until is None:
        return None, state
    if state.probing:  # until the probe's verdict: its failure's next probe at the soonest
        return max(state.open_until, now) + state.wait_ms, state
    if now >= state.open_until:
        return None, replace(state, probing=True)
    return state.open_until, state


def record(
    state: OriginState, *, failed: bool, tenant_id: str, now: int, config: BreakerConfig
) -> tuple[OriginState, Change | None]:
    """The state after one attempt's outcome, and whether the breaker opened or closed."""
    if not failed:
        return CLOSED, (Change.CLOSED if state.open_until is not None else None)
    failures = state.failures + 1
    tenants = state.tenants | {tenant_id}
    if state.open_until is not None:
        if not state.probing:  # sent before it opened: no news
            return replace(state, failures=failures, tenants=tenants), None
        wait = min(state.wait_ms * 2, config.max_wait_ms)
        reopened = OriginState(
            failures=failures, open_until=now + wait, wait_ms=wait, tenants=tenants
        )
        return reopened, None
    if failures < config.threshold:
        return replace(state, failures=failures, tenants=tenants), None
    opened = OriginState(
        failures=failures,
        open_until=now + config.first_wait_ms,
        wait_ms=config.first_wait_ms,
        tenants=tenants,
    )
    return opened, Change.OPENED
