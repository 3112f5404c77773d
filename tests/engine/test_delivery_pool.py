"""The connection pool against real loopback servers: keep-alive, reuse only when safe
(a request is never sent twice), per-origin and total caps, idle expiry, and nothing
half-used ever lent out again."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from appliance.engine.delivery import EXCERPT_BYTES, DeliveryClient, SendResult, send
from appliance.engine.delivery.pool import KEEPALIVE_EXPIRY_S
from tests.engine.loopback import (
    BODY,
    LOOPBACK_ALLOWED,
    canned,
    delivered,
    delivery,
    keep_alive_server,
    receiver,
    response,
)


def client(**options: int) -> DeliveryClient:
    return DeliveryClient(LOOPBACK_ALLOWED, **options)


async def test_sequential_deliveries_reuse_one_keep_alive_connection() -> None:
    async with keep_alive_server() as server, client() as c:
        for _ in range(3):
            assert await delivered(c, server.url()) == 200
        assert (c.pool.open_connections(), c.pool.idle_connections()) == (1, 1)
    assert server.on_connection == [1, 1, 1]
    assert server.bodies == [BODY] * 3


async def test_a_connection_the_server_closed_while_idle_is_never_reused() -> None:
    async def close_after_first(n: int) -> tuple[bytes, bool]:
        return response(), n > 1  # no "Connection: close": the server just hangs up

    async with keep_alive_server(close_after_first) as server, client() as c:
        assert await delivered(c, server.url()) == 200
        await server.wait_ended(1)
        # The idle socket is readable (EOF): the pool drops it instead of sending on it,
        # so the delivery neither fails nor is sent twice.
        assert await delivered(c, server.url()) == 200
    assert server.on_connection == [1, 2]


async def test_connection_close_in_the_response_is_honoured() -> None:
    async def say_close(n: int) -> tuple[bytes, bool]:
        return response(b"ok", "Connection: close"), True  # but the server keeps it open

    async with keep_alive_server(say_close) as server, client() as c:
        assert await delivered(c, server.url()) == 200
        await server.wait_ended(1)  # the client closed it
        assert (c.pool.open_connections(), c.pool.idle_connections()) == (0, 0)
        assert await delivered(c, server.url()) == 200
    assert server.on_connection == [1, 2]


@pytest.mark.parametrize(("size", "reused"), [(EXCERPT_BYTES, True), (EXCERPT_BYTES * 8, False)])
async def test_a_body_cut_at_the_excerpt_closes_the_connection(size: int, reused: bool) -> None:
    async def big(n: int) -> tuple[bytes, bool]:
        return response(b"x" * size), True

    async with keep_alive_server(big) as server, client() as c:
        for _ in range(2):
            result = await send(c, delivery(server.url()))
            assert (result.status, result.error, len(result.excerpt)) == (200, None, EXCERPT_BYTES)
    assert server.on_connection == ([1, 1] if reused else [1, 2])


async def test_idle_connections_expire(mock_clock: trio.testing.MockClock) -> None:
    # mock_clock: virtual time stands still unless jumped, so real sockets work as usual.
    async with keep_alive_server() as server, client() as c:
        await delivered(c, server.url())
        mock_clock.jump(KEEPALIVE_EXPIRY_S - 0.5)
        await delivered(c, server.url())
        assert server.on_connection == [1, 1]
        mock_clock.jump(KEEPALIVE_EXPIRY_S + 0.5)
        await delivered(c, server.url())
        assert server.on_connection == [1, 1, 2]
        await server.wait_ended(1)
        assert c.pool.open_connections() == 1


async def test_at_most_max_per_host_requests_are_in_flight() -> None:
    release = trio.Event()
    ok = canned("200 OK")

    async def held(stream: trio.SocketStream) -> None:
        await release.wait()
        await ok(stream)

    results: list[SendResult] = []

    async def deliver(c: DeliveryClient, url: str) -> None:
        results.append(await send(c, delivery(url)))

    async with receiver(held) as rx, client(max_per_host=2) as c:
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(deliver, c, rx.url())
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            assert len(rx.requests) == 2
            release.set()
    assert [r.status for r in results] == [200] * 4
    assert len(rx.requests) == 4


async def test_at_the_connection_cap_an_idle_connection_of_another_origin_is_closed() -> None:
    async with keep_alive_server() as a, keep_alive_server() as b, client(max_connections=1) as c:
        await delivered(c, a.url())
        await delivered(c, b.url())
        await a.wait_ended(1)
        assert (c.pool.open_connections(), c.pool.idle_connections()) == (1, 1)


async def test_at_the_connection_cap_a_handed_back_connection_makes_room() -> None:
    release = trio.Event()

    async def held(n: int) -> tuple[bytes, bool]:
        await release.wait()
        return response(), True

    statuses: list[int | None] = []

    async def deliver_to_b(url: str) -> None:
        statuses.append(await delivered(c, url))

    async with (
        keep_alive_server(held) as a,
        keep_alive_server() as b,
        client(max_connections=1) as c,
    ):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(delivered, c, a.url())
            await a.arrived.wait()
            nursery.start_soon(deliver_to_b, b.url())
            await trio.testing.wait_all_tasks_blocked()
            release.set()  # a's connection comes back while b waits: it closes, b connects
        await a.wait_ended(1)
        assert (statuses, b.on_connection, c.pool.open_connections()) == ([200], [1], 1)


@pytest.mark.parametrize("cap", ["max_connections", "max_per_host"])
async def test_waiting_at_a_cap_is_bounded_by_the_callers_deadline(cap: str) -> None:
    """No pool timeout of its own: a request waiting for a turn or a connection waits until
    the caller's deadline, then leaves the pool as it found it."""
    release = trio.Event()

    async def held(n: int) -> tuple[bytes, bool]:
        await release.wait()
        return response(), True

    async with keep_alive_server(held) as server, client(**{cap: 1}) as c:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(delivered, c, server.url())
            await server.arrived.wait()
            with trio.move_on_after(0.2) as scope:
                await send(c, delivery(server.url()))
            assert scope.cancelled_caught
            release.set()
        assert await delivered(c, server.url()) == 200
        assert (c.pool.open_connections(), c.pool.idle_connections()) == (1, 1)
    assert server.on_connection == [1, 1]


@pytest.mark.parametrize("sent_before_hanging", [b"", response(b"x" * 100)[:-50]])
async def test_a_cancelled_delivery_leaves_no_connection_behind(sent_before_hanging: bytes) -> None:
    never = trio.Event()

    async def first_hangs(n: int) -> tuple[bytes, bool]:
        if n == 1:
            await never.wait()
        return response(), True

    async def hang_after_part(n: int) -> tuple[bytes, bool]:
        return (sent_before_hanging if n == 1 else response()), True

    respond = hang_after_part if sent_before_hanging else first_hangs
    async with keep_alive_server(respond) as server, client() as c:
        with trio.move_on_after(0.2) as scope:
            await send(c, delivery(server.url()))
        assert scope.cancelled_caught
        assert (c.pool.open_connections(), c.pool.idle_connections()) == (0, 0)
        assert await delivered(c, server.url()) == 200
    assert server.on_connection == [1, 2]


async def test_a_rate_per_host_spaces_the_starts_of_one_origin() -> None:
    """20 per second: five deliveries start at least 4 × 50 ms apart in all, however fast
    the receiver answers (a lower bound: the pool can never be quicker than its pace)."""
    async with keep_alive_server() as server, client(max_rate_per_host=20) as c:
        began = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(delivered, c, server.url())
        assert trio.current_time() - began >= 4 * 0.05
    assert len(server.bodies) == 5
