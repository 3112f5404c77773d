"""The production :class:`~appliance.engine.delivery.exchange.Exchange`: Steeple's own
HTTP/1.1 client over the guarded connection pool.

Rules:
- Every target URL passes the static checks (``core.addresses.check_target_url``) before
  anything is resolved, whoever calls: nothing can use this client to reach ``localhost``
  or a metadata host name. The check and the parse are pure, so both are cached per URL.
- Every connection is opened by :class:`~appliance.engine.delivery.connect.Connector`
  (each resolved address judged, only a checked address connected to), and lent by
  :class:`~appliance.engine.delivery.pool.ConnectionPool` (per-origin cap, keep-alive,
  never a request sent twice).
- Nothing from the environment, no redirects, no cookies: ``core.delivery`` sets every
  header; this client adds only ``Host`` (first) and, for a method that carries a body,
  ``Content-Length`` (last; a GET or DELETE has none, engine/delivery/request.py), so the
  bytes on the wire equal what httpx would send for the same request.
- No httpx on this path: building httpx's models cost ≈ a quarter of the trio thread's CPU
  per delivery, its client half of the rest (bench/HISTORY.md).
"""

from __future__ import annotations

import ssl
from types import TracebackType

from appliance.core.addresses import AddressPolicy, check_target_url
from appliance.core.delivery import DeliveryRequest
from appliance.core.retry import TransportFailure
from appliance.engine.delivery.connect import Connector, OpenTCP, Resolver, open_tcp, resolve_host
from appliance.engine.delivery.exchange import EXCERPT_BYTES, Answer, DeliveryFailed
from appliance.engine.delivery.pool import MAX_CONNECTIONS, MAX_IDLE_CONNECTIONS, ConnectionPool
from appliance.engine.delivery.target import Target, parse_target
from appliance.errors import ValidationError

_TARGETS_MAX = 4096


class DeliveryClient:
    """Sends delivery requests over guarded keep-alive connections (see the module rules).
    Build it once and reuse it: building costs an SSL context."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        max_per_host: int = 8,
        max_rate_per_host: int = 0,
        max_connections: int = MAX_CONNECTIONS,
        max_idle: int = MAX_IDLE_CONNECTIONS,
        resolve: Resolver = resolve_host,
        connect: OpenTCP = open_tcp,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._policy = policy
        self._targets: dict[str, Target] = {}  # passed the static checks, parsed
        connector = Connector(policy, ssl_context=ssl_context, resolve=resolve, connect=connect)
        self.pool = ConnectionPool(
            connector, max_per_host=max_per_host, max_connections=max_connections,
            max_idle=max_idle, max_rate_per_host=max_rate_per_host,
        )  # fmt: skip

    async def exchange(self, request: DeliveryRequest) -> Answer:
        """Send the request and read the answer, its body cut at the excerpt size."""
        target = self._target(request.url)
        headers = [(b"Host", target.netloc)]
        headers += [
            (name.encode("ascii"), value.encode("ascii")) for name, value in request.headers
        ]
        if request.method.carries_body:
            headers.append((b"Content-Length", b"%d" % len(request.body)))
        conn = await self.pool.acquire(target.origin)
        complete = False
        try:
            await conn.send_request(request.method, target.path, headers, request.body)
            head = await conn.receive_head()
            excerpt, error, complete = await conn.read_excerpt(EXCERPT_BYTES)
        finally:
            self.pool.release(target.origin, conn, complete=complete)
        return Answer(status=head.status, headers=head.headers, excerpt=excerpt, error=error)

    def _target(self, url: str) -> Target:
        target = self._targets.get(url)
        if target is None:
            try:
                check_target_url(url, self._policy)
            except ValidationError as exc:
                message = "; ".join(e.message for e in exc.errors)
                raise DeliveryFailed(TransportFailure.BLOCKED, message) from None
            target = parse_target(url)
            if len(self._targets) >= _TARGETS_MAX:
                self._targets.clear()
            self._targets[url] = target
        return target

    async def aclose(self) -> None:
        self.pool.close()

    async def __aenter__(self) -> DeliveryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
