"""HTTP/1.1 connections that keep reading while a response is in progress.

hypercorn 0.18's ``H11Protocol`` waits on ``can_read`` when h11 pauses (bytes after a
complete request, its response still going out). The wait blocks the connection's only
reader and nothing sets the event once the peer is gone: a client that sent a byte too
many on an endless stream (``/v1/events/stream``, ``/events/stream``) held its socket.

Rules this module guards:

1. No task waits for ``can_read``: a pause ends the parsing pass and the reader reads on,
   so an end of file or a reset ends the response (``http.disconnect``) and the socket.
2. What h11 holds unparsed is bounded (``MAX_UNREAD``); past it the connection closes.
3. Pipelined requests are answered in order: parsed once the connection is recycled.
4. One parsing pass at a time per connection; a pass sees new bytes in its own loop.

``install`` swaps the class in for the process; ``tests/api/test_serving.py`` pins the
hypercorn internals relied on.
"""

from __future__ import annotations

from typing import Any, Final

import h11
import hypercorn.protocol
from hypercorn.events import Closed, Event, RawData
from hypercorn.protocol import h11 as hypercorn_h11
from hypercorn.protocol.events import Event as StreamEvent
from hypercorn.protocol.events import StreamClosed
from hypercorn.protocol.h11 import H2CProtocolRequiredError, H2ProtocolAssumedError

__all__ = ["MAX_UNREAD", "H11Protocol", "install"]

MAX_UNREAD: Final = 65_536  # bytes a client may send ahead of the response it awaits


class _Paused(Exception):
    """h11 will parse no more until the response in progress ends (rule 1)."""


class _NeverWait:
    """Stands in for ``H11Protocol.can_read``: a pause raises instead of waiting."""

    async def clear(self) -> None:
        pass

    async def set(self) -> None:
        pass

    async def wait(self) -> None:
        raise _Paused

    def is_set(self) -> bool:
        return True


class H11Protocol(hypercorn_h11.H11Protocol):
    """hypercorn's HTTP/1.1 protocol, with the reader never blocked by a pause."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.can_read = _NeverWait()
        self._parsing = False

    async def handle(self, event: Event) -> None:
        if isinstance(event, RawData):
            self.connection.receive_data(event.data)
            await self._parse()
        else:
            await super().handle(event)

    async def stream_send(self, event: StreamEvent) -> None:
        try:
            await super().stream_send(event)
        finally:
            # Not in this task: it is the response's, which quart-trio cancels as it ends.
            if isinstance(event, StreamClosed) and self._recycled() and self._held():
                self.task_group.spawn(self._resume)

    async def _resume(self) -> None:
        """Rule 3: the requests pipelined behind the one just answered."""
        try:
            await self._parse()
        except (H2CProtocolRequiredError, H2ProtocolAssumedError):
            await self.send(Closed())  # an upgrade pipelined behind a request: refused

    async def _parse(self) -> None:
        if self._parsing:
            return  # rule 4: that pass's loop calls next_event again after each await
        self._parsing = True
        try:
            await self._handle_events()
        except _Paused:
            if self._held() > MAX_UNREAD:
                await self.send(Closed())
        finally:
            self._parsing = False

    def _recycled(self) -> bool:
        return self.stream is None and self.connection.our_state is h11.IDLE

    def _held(self) -> int:
        data, _closed = self.connection.trailing_data
        return len(data)


def install() -> None:
    """Serve every HTTP/1.1 connection of this process with :class:`H11Protocol`."""
    # ProtocolWrapper (hypercorn/protocol/__init__.py) builds this name for every connection.
    current = hypercorn.protocol.H11Protocol  # type: ignore[attr-defined]
    if current is not H11Protocol and current is not hypercorn_h11.H11Protocol:
        raise RuntimeError(f"hypercorn's H11Protocol is already replaced, by {current!r}")
    hypercorn.protocol.H11Protocol = H11Protocol  # type: ignore[attr-defined]
