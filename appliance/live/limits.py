"""Caps on open live streams — the API's ``GET /v1/events/stream`` (per API key) and the
web UI's ``/events/stream`` (per session) — and what a refusal records
(docs/operations.md, "Stream limits").

Rules this module guards:

- **One count.** :class:`StreamRegistry` (one per process, in the app's context) counts
  every open stream by its credential (key or session), its tenant and the process. A
  stream holds a slot only inside :meth:`StreamRegistry.slot`, so however it ends —
  client gone, shutdown, revocation, error — its slot is released.
- **Refused before it starts.** :func:`admit` answers a full limit with
  :class:`StreamLimitReached` (429). The slot itself is taken when the response body
  starts (:func:`holding`): a response that is never sent holds nothing. Should the
  limit fill between the two, the stream ends at once, empty, and the client's retry
  gets the 429.
- **Bounded audit.** A refusal appends ``stream.refused`` to the tenant's feed at most
  once per tenant and limit per :data:`REFUSAL_EVENT_EVERY_MS`: refusals cannot flood the
  event log, and the throttle's memory is bounded by tenants × limits.
- **Rechecked while open.** An open stream asks again every :data:`RECHECK_S` whether its
  credential still works (:class:`appliance.live.hub.Recheck`).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from appliance.core.events import Actor, EventType
from appliance.errors import SteepleError
from appliance.store.events import append_event
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection

RECHECK_S = 5.0  # an open stream's key or session (and tenant) is looked up again this often
RETRY_AFTER_S = 10  # what a refused client is told to wait (Retry-After)
REFUSAL_EVENT_EVERY_MS = 60_000


class Surface(enum.StrEnum):
    API = "api"  # GET /v1/events/stream, an API key
    UI = "ui"  # /events/stream, a web UI session


class Limit(enum.StrEnum):
    KEY = "key"
    SESSION = "session"
    TENANT = "tenant"
    PROCESS = "process"


SETTING_OF = {
    Limit.KEY: "max_streams_per_key",
    Limit.SESSION: "max_streams_per_session",
    Limit.TENANT: "max_streams_per_tenant",
    Limit.PROCESS: "max_streams",
}
_WHO = {
    Limit.KEY: "this API key has",
    Limit.SESSION: "this sign-in has",
    Limit.TENANT: "the tenant has",
    Limit.PROCESS: "the appliance serves",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamLimits:
    """Open streams at most (the settings of the same names, docs/configuration.md)."""

    per_key: int = 4
    per_session: int = 4
    per_tenant: int = 16
    per_process: int = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class Holder:
    """Who a stream is for: ``credential`` is the key's id (API) or the session's id hash
    (UI); ``actor`` is whom a refusal names."""

    surface: Surface
    tenant_id: str
    credential: str
    actor: Actor


class StreamLimitReached(SteepleError):
    def __init__(self, limit: Limit, most: int) -> None:
        super().__init__(
            f"{_WHO[limit]} {most} open streams, the most {SETTING_OF[limit]} allows;"
            f" close one, or retry in {RETRY_AFTER_S} s"
        )
        self.limit = limit
        self.most = most


@dataclass(eq=False)
class StreamRegistry:
    """The process's open streams, counted per credential, per tenant and in all."""

    limits: StreamLimits = field(default_factory=StreamLimits)
    recheck_s: float = RECHECK_S
    _counts: dict[tuple[Limit, str], int] = field(default_factory=dict)
    _surfaces: dict[Surface, int] = field(default_factory=lambda: dict.fromkeys(Surface, 0))
    _refusals_recorded: dict[tuple[str, Limit], int] = field(default_factory=dict)  # → ms

    def check(self, holder: Holder) -> None:
        """Raise :class:`StreamLimitReached` naming the first of ``holder``'s limits that
        is full now."""
        for key, most in self._limits(holder):
            if self._counts.get(key, 0) >= most:
                raise StreamLimitReached(key[0], most)

    @contextlib.contextmanager
    def slot(self, holder: Holder) -> Iterator[None]:
        """Hold one of ``holder``'s slots for the block; StreamLimitReached when full."""
        self.check(holder)
        keys = [key for key, _ in self._limits(holder)]
        for key in keys:
            self._counts[key] = self._counts.get(key, 0) + 1
        self._surfaces[holder.surface] += 1
        try:
            yield
        finally:
            self._surfaces[holder.surface] -= 1
            for key in keys:
                self._counts[key] -= 1
                if not self._counts[key]:
                    del self._counts[key]

    def open_streams(self) -> dict[Surface, int]:
        """Open streams per surface, for ``steeple_open_streams``."""
        return dict(self._surfaces)

    def should_record(self, tenant_id: str, limit: Limit, *, now: int) -> bool:
        """Whether a refusal at ``now`` (ms) is the first of its tenant and limit in
        :data:`REFUSAL_EVENT_EVERY_MS`; remembers it when so."""
        last = self._refusals_recorded.get((tenant_id, limit))
        if last is not None and 0 <= now - last < REFUSAL_EVENT_EVERY_MS:
            return False
        self._refusals_recorded = {
            key: at
            for key, at in self._refusals_recorded.items()
            if 0 <= now - at < REFUSAL_EVENT_EVERY_MS
        }
        self._refusals_recorded[tenant_id, limit] = now
        return True

    def _limits(self, holder: Holder) -> list[tuple[tuple[Limit, str], int]]:
        own = Limit.KEY if holder.surface is Surface.API else Limit.SESSION
        own_most = self.limits.per_key if own is Limit.KEY else self.limits.per_session
        return [
            ((own, holder.credential), own_most),
            ((Limit.TENANT, holder.tenant_id), self.limits.per_tenant),
            ((Limit.PROCESS, ""), self.limits.per_process),
        ]


async def admit(registry: StreamRegistry, db: Store, holder: Holder, *, now: int) -> None:
    """Raise :class:`StreamLimitReached` when ``holder``'s stream would be over a limit
    now, recording ``stream.refused`` first (at most once per tenant and limit a minute)."""
    try:
        registry.check(holder)
    except StreamLimitReached as refused:
        if registry.should_record(holder.tenant_id, refused.limit, now=now):
            await db.write(record_refusal, holder=holder, refused=refused, now=now)
        raise


def record_refusal(
    conn: Connection, *, holder: Holder, refused: StreamLimitReached, now: int
) -> None:
    append_event(
        conn,
        tenant_id=holder.tenant_id,
        type=EventType.STREAM_REFUSED,
        now=now,
        data={"surface": str(holder.surface), "limit": str(refused.limit), "max": refused.most},
        actor=holder.actor,
    )


async def holding(
    registry: StreamRegistry, holder: Holder, chunks: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """``chunks`` while holding one of ``holder``'s slots; nothing when its limit filled
    since :func:`admit` (no await between the check and the take)."""
    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
        try:
            registry.check(holder)
        except StreamLimitReached:
            return
        with registry.slot(holder):
            async for chunk in chunks:
                yield chunk
