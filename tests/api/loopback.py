"""A test app served by a real hypercorn on a free loopback port, inside the test's own
trio run (its event hub running beside it), and live streams read over real sockets."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

import httpx
import hypercorn.config
import hypercorn.trio
import trio
from quart_trio import QuartTrio

from appliance.live.hub import EventHub


@asynccontextmanager
async def served(app: QuartTrio) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app`` on a free loopback port; on exit the hub closes (every stream
    ends, as at shutdown) and the server stops."""
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 5
    hub: EventHub = app.extensions["steeple"].event_hub
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        serve = partial(hypercorn.trio.serve, app, config, shutdown_trigger=stop.wait)
        (base_url,) = await nursery.start(serve)
        try:
            async with httpx.AsyncClient(base_url=base_url, trust_env=False, timeout=30) as client:
                yield client
        finally:
            hub.close()
            stop.set()


@dataclass
class Stream:
    """One open SSE response, read by a task of its own: the ``id`` of every message so
    far, and whether the server ended the response."""

    response: httpx.Response
    lines: AsyncIterator[str]
    ids: list[int] = field(default_factory=list)
    clean_end: bool = False  # the server ended the response (its last chunk), no reset
    ended: trio.Event = field(default_factory=trio.Event)
    changed: trio.Event = field(default_factory=trio.Event)

    async def read(self) -> None:
        try:
            async for line in self.lines:
                if line.startswith("id: "):
                    self.ids.append(int(line.removeprefix("id: ")))
                    self._changed()
            self.clean_end = True
        except (httpx.ReadError, httpx.RemoteProtocolError):
            pass  # cut off rather than ended: ``ended`` all the same
        finally:
            self.ended.set()
            self._changed()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait_for(self, predicate: Callable[[Stream], bool], seconds: float = 10) -> None:
        """Until ``predicate(self)``, for at most ``seconds`` (then the test fails)."""
        with trio.fail_after(seconds):
            while not predicate(self):
                await self.changed.wait()


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> AsyncIterator[Stream | httpx.Response]:
    """A started stream (its first line, ``retry:``, was read: the server holds its slot),
    or the refusal's response (read whole) when the answer is not 200."""
    async with client.stream("GET", path, headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            yield response
            return
        lines = response.aiter_lines()
        first = await lines.__anext__()
        assert first.startswith("retry: "), first
        stream = Stream(response, lines)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.read)
            try:
                yield stream
            finally:
                nursery.cancel_scope.cancel()


async def wait_until(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Until ``condition()`` holds (asked every 10 ms), for at most ``seconds``: for state
    the server's own tasks change without announcing it (a slot given back)."""
    with trio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 - nothing to wait on: polled, with a deadline
            await trio.sleep(0.01)
