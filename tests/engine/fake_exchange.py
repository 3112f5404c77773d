"""An in-memory fake of the delivery interface (``engine.delivery.Exchange``): the tenant's
endpoint as the dispatcher sees it, without a socket.

It takes the ``DeliveryRequest`` the dispatcher built, records it with the trio time it
arrived, and returns the ``Answer`` its ``respond`` gives — or raises what ``respond``
raises (a ``DeliveryFailed`` for "no answer"). The real client runs against real loopback
servers in ``tests/engine/test_delivery_*.py`` and ``test_dispatcher_loopback.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

import trio

from appliance.core.delivery import DeliveryRequest
from appliance.engine.delivery import Answer


class Headers(Mapping[str, str]):
    """A request's headers by case-insensitive name (each name is sent once)."""

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self._values = {name.lower(): value for name, value in pairs}

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the endpoint got it."""

    url: str
    headers: Headers
    content: bytes

    @classmethod
    def of(cls, request: DeliveryRequest) -> Received:
        return cls(url=request.url, headers=Headers(request.headers), content=request.body)


Respond = Callable[[Received, int], Awaitable[Answer]]


def reply(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Answer:
    """An answer as the real client returns it: header names lower-case, bytes."""
    pairs = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Answer(status=status, headers=pairs, excerpt=body)


async def answer_ok(request: Received, n: int) -> Answer:
    return reply(200, b"ok")


@dataclass
class Endpoint:
    """The tenant's endpoint: records every request (with the trio time it arrived) and
    answers with ``respond(request, n)``, n counting from 1. An ``Exchange``."""

    respond: Respond = answer_ok
    requests: list[Received] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)

    async def exchange(self, request: DeliveryRequest) -> Answer:
        received = Received.of(request)
        self.requests.append(received)
        self.arrived.append(trio.current_time())
        return await self.respond(received, len(self.requests))

    def header(self, name: str) -> list[str]:
        return [r.headers[name] for r in self.requests]
