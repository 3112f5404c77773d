"""Keep-alive connections per origin, lent out one exchange at a time.

Rules:
- At most ``max_per_host`` exchanges in flight per origin (scheme, host, port); at most
  ``max_connections`` connections open in all (an idle one of another origin is closed to
  make room). Waiting for either has no limit of its own: the attempt's deadline bounds it.
- With ``max_rate_per_host`` (requests per second, 0: none), exchanges with one origin
  start at least ``1 / rate`` seconds apart, on trio's monotonic clock: each takes the
  next free start time when it has its turn and sleeps until then (holding the turn, so
  the origin's cap also bounds how many wait).
- Each origin keeps a stack of idle connections (most recently used first); at most
  ``max_idle`` idle in all; one idle for longer than ``idle_expiry_s`` is closed, lazily,
  when the next request comes (no timer task).
- A connection goes back to the pool only after a complete exchange that the response
  reader calls reusable (response.py). Any error, any cancellation, a body cut short: the
  connection is closed, so no half-used connection is ever lent out again.
- An idle connection is reused only if its socket is quiet (``Connection.is_quiet``: not
  readable, so the server has not closed it). A request is never sent twice: if a reused
  connection fails anyway (the server closed it in the instant between check and use), the
  attempt fails and the run's retry policy decides. Resending a POST the receiver may
  already have processed would be a silent duplicate.
"""

from __future__ import annotations

from collections import OrderedDict

import trio

from appliance.engine.delivery.connect import Connector
from appliance.engine.delivery.connection import Connection
from appliance.engine.delivery.target import Origin

MAX_CONNECTIONS = 100
MAX_IDLE_CONNECTIONS = 20
KEEPALIVE_EXPIRY_S = 5.0
PACED_ORIGINS_KEPT = 1024  # start times kept before the past ones are dropped


class _OriginState:
    """Mutable on purpose: one origin's turn-taking and its idle connections."""

    __slots__ = ("idle", "turns", "users")

    def __init__(self, max_per_host: int) -> None:
        self.turns = trio.Semaphore(max_per_host)
        self.idle: list[Connection] = []  # a stack: the most recently used on top
        self.users = 0  # tasks holding or waiting for a turn


async def _acquire(semaphore: trio.Semaphore) -> None:
    try:
        semaphore.acquire_nowait()  # the common case: no checkpoint
    except trio.WouldBlock:
        await semaphore.acquire()


class ConnectionPool:
    """Lends connections per origin; see the module rules."""

    def __init__(
        self,
        connector: Connector,
        *,
        max_per_host: int,
        max_connections: int = MAX_CONNECTIONS,
        max_idle: int = MAX_IDLE_CONNECTIONS,
        idle_expiry_s: float = KEEPALIVE_EXPIRY_S,
        max_rate_per_host: int = 0,
    ) -> None:
        if max_per_host < 1 or max_connections < 1:
            raise ValueError("max_per_host and max_connections must be at least 1")
        if max_rate_per_host < 0:
            raise ValueError("max_rate_per_host must not be negative")
        self._interval_s = 1 / max_rate_per_host if max_rate_per_host else 0.0
        self._next_start: dict[Origin, float] = {}  # paced origins: their next free start
        self._connector = connector
        self._max_per_host = max_per_host
        self._max_idle = max_idle
        self._idle_expiry_s = idle_expiry_s
        self._max_connections = max_connections
        # One permit per open connection; max_value turns a double release into an error.
        self._permits = trio.Semaphore(max_connections, max_value=max_connections)
        self._origins: dict[Origin, _OriginState] = {}
        self._idle: OrderedDict[Connection, Origin] = OrderedDict()  # oldest first
        self._closed = False

    @property
    def max_per_host(self) -> int:
        """Exchanges in flight at once per origin."""
        return self._max_per_host

    def open_connections(self) -> int:
        return self._max_connections - self._permits.value

    def idle_connections(self) -> int:
        return len(self._idle)

    async def acquire(self, origin: Origin) -> Connection:
        """A connection to ``origin`` for one exchange; hand it back with :meth:`release`."""
        state = self._origins.get(origin)
        if state is None:
            state = self._origins[origin] = _OriginState(self._max_per_host)
        state.users += 1
        try:
            await _acquire(state.turns)
        except BaseException:
            self._leave(origin, state)
            raise
        try:
            await self._pace(origin)
            return self._reuse(state) or await self._open(origin)
        except BaseException:
            state.turns.release()
            self._leave(origin, state)
            raise

    async def _pace(self, origin: Origin) -> None:
        """Wait for this origin's next free start time (see the module rules)."""
        if not self._interval_s:
            return
        now = trio.current_time()
        start = max(now, self._next_start.get(origin, now))
        self._next_start[origin] = start + self._interval_s
        if len(self._next_start) > PACED_ORIGINS_KEPT:
            self._next_start = {o: t for o, t in self._next_start.items() if t > now}
        if start > now:
            await trio.sleep_until(start)

    def release(self, origin: Origin, conn: Connection, *, complete: bool) -> None:
        """End the exchange; ``complete`` means the response was read to its end."""
        if complete and not self._closed and not self._room_wanted() and conn.start_next_exchange():
            self._park(origin, conn)
        else:
            self._discard(conn)
        state = self._origins[origin]
        state.turns.release()
        self._leave(origin, state)

    def close(self) -> None:
        """Close every idle connection; connections in use close when handed back."""
        self._closed = True
        while self._idle:
            self._evict_oldest()

    def _room_wanted(self) -> bool:
        """At the connection cap with requests waiting: a connection handed back closes so
        that a waiting request can open its own (it may be for another origin)."""
        return self._permits.value == 0 and self._permits.statistics().tasks_waiting > 0

    def _reuse(self, state: _OriginState) -> Connection | None:
        self._expire()
        while state.idle:
            conn = state.idle.pop()
            del self._idle[conn]
            if conn.is_quiet():
                return conn
            self._discard(conn)
        return None

    async def _open(self, origin: Origin) -> Connection:
        if self._permits.value == 0 and self._idle:
            self._evict_oldest()  # another origin's idle connection makes room
        await _acquire(self._permits)
        try:
            stream, tcp = await self._connector.open(*origin)
        except BaseException:
            self._permits.release()
            raise
        return Connection(stream, tcp)

    def _park(self, origin: Origin, conn: Connection) -> None:
        if len(self._idle) >= self._max_idle:
            self._evict_oldest()
        conn.idle_since = trio.current_time()
        self._idle[conn] = origin
        self._origins[origin].idle.append(conn)

    def _expire(self) -> None:
        oldest_allowed = trio.current_time() - self._idle_expiry_s
        while self._idle and next(iter(self._idle)).idle_since < oldest_allowed:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        conn, origin = self._idle.popitem(last=False)
        state = self._origins[origin]
        state.idle.remove(conn)
        self._discard(conn)
        self._forget_if_unused(origin, state)

    def _discard(self, conn: Connection) -> None:
        conn.close()
        self._permits.release()

    def _leave(self, origin: Origin, state: _OriginState) -> None:
        state.users -= 1
        self._forget_if_unused(origin, state)

    def _forget_if_unused(self, origin: Origin, state: _OriginState) -> None:
        if state.users == 0 and not state.idle:
            del self._origins[origin]
