"""What the delivery client makes of a receiver's answer, or of its silence, against real
loopback servers: every problem is a DeliveryFailed with its TransportFailure (``send``
reports it and never raises), the excerpt is cut once, redirects are not followed, and
the caller's deadline is the only time limit."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from appliance.core.addresses import IPAddress
from appliance.core.delivery import DeliveryRequest
from appliance.core.retry import TransportFailure
from appliance.engine.delivery import EXCERPT_BYTES, Answer, DeliveryClient, SendResult, send
from tests.engine.loopback import (
    LOOPBACK_ALLOWED,
    OPEN,
    canned,
    delivery,
    fake_dns,
    keep_alive_server,
    receiver,
    response,
)


async def test_redirect_is_not_followed_and_location_is_kept() -> None:
    reply = canned("302 Found", [("Location", "/elsewhere")])
    async with receiver(reply) as rx, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert (result.status, result.location, result.failure) == (302, "/elsewhere", None)
    assert len(rx.requests) == 1


async def test_retry_after_is_reported() -> None:
    reply = canned("429 Too Many Requests", [("Retry-After", "120")], b"slow down")
    async with receiver(reply) as rx, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert (result.status, result.retry_after, result.excerpt) == (429, "120", "slow down")


async def test_response_excerpt_is_capped_at_16_kib() -> None:
    reply = canned("500 Internal Server Error", body=b"x" * (EXCERPT_BYTES * 6 + 5))
    async with receiver(reply) as rx, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert result.status == 500
    assert result.excerpt == "x" * EXCERPT_BYTES


def test_an_answer_refuses_an_excerpt_longer_than_the_cut() -> None:
    """The excerpt is cut once, where the body is read; nothing downstream cuts again, so
    an Answer (a fake's too) must never carry more."""
    with pytest.raises(ValueError, match="at most 16384 bytes"):
        Answer(status=200, excerpt=b"x" * (EXCERPT_BYTES + 1))


async def test_undecodable_excerpt_is_replaced_not_raised() -> None:
    async with (
        receiver(canned("200 OK", body=b"\xff\xfeok")) as rx,
        DeliveryClient(LOOPBACK_ALLOWED) as client,
    ):
        result = await send(client, delivery(rx.url()))
    assert result.excerpt == "\ufffd\ufffdok"


async def test_connection_refused_maps_to_connect() -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        async with DeliveryClient(LOOPBACK_ALLOWED) as client:
            result = await send(client, delivery(f"http://127.0.0.1:{port}/"))
    assert result.failure is TransportFailure.CONNECT
    assert result.status is None


async def test_dns_failure_maps_to_dns() -> None:
    async with DeliveryClient(OPEN, resolve=fake_dns({})) as client:
        result = await send(client, delivery("https://gone.example/hook"))
    assert result.failure is TransportFailure.DNS
    assert result.error == "could not resolve host 'gone.example'"


async def test_garbage_response_maps_to_protocol() -> None:
    async def garbage(stream: trio.SocketStream) -> None:
        await stream.send_all(b"this is not HTTP\r\n\r\n")

    async with receiver(garbage) as rx, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
    assert result.failure is TransportFailure.PROTOCOL


async def test_server_hanging_up_without_an_answer_is_a_protocol_failure() -> None:
    async def hang_up(n: int) -> tuple[bytes, bool]:
        return b"", False

    async with keep_alive_server(hang_up) as server, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(server.url()))
        assert client.pool.open_connections() == 0
    assert result.failure is TransportFailure.PROTOCOL
    assert result.error == "the server closed the connection without answering"


async def test_a_truncated_body_is_reported_with_the_status() -> None:
    async def truncated(n: int) -> tuple[bytes, bool]:
        return response(b"x" * 100)[:-90], False

    async with keep_alive_server(truncated) as server, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(server.url()))
        assert client.pool.open_connections() == 0
    assert (result.status, result.failure, result.excerpt) == (200, None, "x" * 10)
    assert result.error is not None and result.error.startswith("reading the response body")


async def test_a_body_framed_by_the_connection_closing_is_read_whole() -> None:
    async def until_close(n: int) -> tuple[bytes, bool]:
        return b"HTTP/1.1 200 OK\r\n\r\nuntil the end", False

    async with keep_alive_server(until_close) as server, DeliveryClient(LOOPBACK_ALLOWED) as c:
        result = await send(c, delivery(server.url()))
        assert c.pool.open_connections() == 0
    assert (result.status, result.excerpt, result.error) == (200, "until the end", None)


async def test_interim_responses_are_skipped() -> None:
    async def continue_first(n: int) -> tuple[bytes, bool]:
        return b"HTTP/1.1 100 Continue\r\n\r\n" + response(b"done"), True

    async with keep_alive_server(continue_first) as server, DeliveryClient(LOOPBACK_ALLOWED) as c:
        result = await send(c, delivery(server.url()))
    assert (result.status, result.excerpt) == (200, "done")


# --- one time limit: the caller's ----------------------------------------------------------


async def test_a_slow_receiver_is_waited_for_as_long_as_the_caller_allows(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No read timeout of the client's own: an answer after 40 s (virtual) arrives, and the
    same receiver is cut off only by the caller's deadline."""

    async def slow(n: int) -> tuple[bytes, bool]:
        await trio.sleep(40)
        return response(b"late but fine"), True

    async with keep_alive_server(slow) as server, DeliveryClient(LOOPBACK_ALLOWED) as client:
        with trio.fail_after(60):
            result = await send(client, delivery(server.url()))
        assert (result.status, result.excerpt, result.latency_ms) == (200, "late but fine", 40_000)
        with trio.move_on_after(30) as scope:
            await send(client, delivery(server.url()))
        assert scope.cancelled_caught
        assert client.pool.open_connections() == 0  # cancelled mid-exchange: closed, not kept
    assert server.on_connection == [1, 1]  # the second went over the kept-alive first one


async def test_a_stalled_write_is_bounded_by_the_caller_and_leaves_nothing_open() -> None:
    never = trio.Event()

    async def never_reads(stream: trio.SocketStream) -> None:
        await never.wait()

    huge = b"x" * (64 * 1024 * 1024)  # more than the loopback socket buffers hold
    async with (
        receiver(never_reads, read_first=False) as rx,
        DeliveryClient(LOOPBACK_ALLOWED) as client,
    ):
        with trio.move_on_after(0.2) as scope:
            await send(client, delivery(rx.url(), body=huge))
        assert scope.cancelled_caught
        assert client.pool.open_connections() == 0


async def test_the_callers_deadline_covers_name_resolution(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def stuck(host: str) -> list[IPAddress]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with DeliveryClient(OPEN, resolve=stuck) as client:
        with trio.move_on_after(5) as scope:
            await client.exchange(delivery("https://slow.example/"))
        assert scope.cancelled_caught
        assert client.pool.open_connections() == 0


async def test_cancellation_propagates_from_send() -> None:
    never = trio.Event()

    async def hang(stream: trio.SocketStream) -> None:
        await never.wait()

    async with receiver(hang) as rx, DeliveryClient(LOOPBACK_ALLOWED) as client:
        results: list[SendResult] = []
        with trio.move_on_after(0.1) as scope:
            results.append(await send(client, delivery(rx.url())))
    assert scope.cancelled_caught and results == []


async def test_a_request_that_cannot_be_framed_is_a_protocol_failure() -> None:
    """``core.delivery`` refuses such header values when a schedule is written; should one
    reach the client anyway, request.py refuses to frame it and nothing is sent."""
    async with receiver(canned("200 OK")) as rx, DeliveryClient(LOOPBACK_ALLOWED) as client:
        bad = DeliveryRequest(url=rx.url(), headers=(("X-Bad", "a\x00b"),), body=b"")
        result = await send(client, bad)
        assert client.pool.open_connections() == 0  # the connection it opened is closed
    assert result.failure is TransportFailure.PROTOCOL
    assert result.error is not None and result.error.startswith("the request cannot be framed")
