"""The response reader (llhttp through httptools) keeps h11's guarantees, against a raw
socket server on loopback that sends exactly the bytes given, part by part: strict framing
whatever the packet boundaries, a malformed or over-long response is a ``protocol``
failure on a connection that is then closed, and a connection is reused only after a
response read to its end that allows keep-alive and left nothing behind."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import h11
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from appliance.core.retry import TransportFailure
from appliance.core.schedules import Method
from appliance.engine.delivery import DeliveryClient, SendResult, send
from appliance.engine.delivery.request import RequestError, frame_request
from appliance.engine.delivery.response import MAX_HEAD_BYTES, ResponseError, ResponseReader
from tests.engine.loopback import LOOPBACK_ALLOWED, delivery, read_request, receiver, serving

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@dataclass
class RawServer:
    """Answers request n with ``answers[n]``: its parts sent one by one, each after the
    client has read the previous one (so each arrives in a read of its own); records the
    connection (from 1) each request came on. The connection stays open for more."""

    answers: list[Sequence[bytes]]
    port: int = 0
    on_connection: list[int] = field(default_factory=list)
    connections: int = 0

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@contextlib.asynccontextmanager
async def raw_server(*answers: Sequence[bytes]) -> AsyncIterator[RawServer]:
    server = RawServer(list(answers))

    async def handle(stream: trio.SocketStream) -> None:
        server.connections += 1
        number = server.connections
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await read_request(stream):
                server.on_connection.append(number)
                for part in server.answers[len(server.on_connection) - 1]:
                    await trio.testing.wait_all_tasks_blocked()
                    await stream.send_all(part)
            await stream.aclose()

    async with serving(handle) as port:
        server.port = port
        yield server


async def two_deliveries(first: Sequence[bytes]) -> tuple[SendResult, RawServer, int]:
    """The first answer as given, then a plain 200; and the connections open after the
    first."""
    async with raw_server(first, [OK]) as server, DeliveryClient(LOOPBACK_ALLOWED) as client:
        with trio.fail_after(10):  # a reader that waits for more would hang here
            result = await send(client, delivery(server.url()))
        open_after_first = client.pool.open_connections()
        second = await send(client, delivery(server.url()))
        assert (second.status, second.excerpt) == (200, "ok")
    return result, server, open_after_first


# --- framing, whatever the packet boundaries: read whole, connection kept ----------------

CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    "parts",
    [
        [CHUNKED + b"5\r\nhel", b"lo\r\n", b"6\r\n world\r", b"\n0\r\n", b"\r\n"],
        [CHUNKED[:10], CHUNKED[10:] + b"b", b";ext=1\r\nhello world\r\n0\r\n\r\n"],
        [CHUNKED + b"b\r\nhello world\r\n0\r\nX-Trailer: yes\r\n", b"\r\n"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhel", b"lo", b" world"],
        [b"HTTP/1.1 200 OK\r\nConte", b"nt-Length: 11\r\n", b"\r", b"\nhello world"],
        [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n",
         b"hello world"],
        [b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n"
         b"Content-Length: 11\r\n\r\nhello world"],
    ],
    ids=["chunked", "chunk-extension", "trailers", "length", "head-split", "100", "103"],
)  # fmt: skip
async def test_a_body_split_across_packets_is_read_whole_and_the_connection_kept(
    parts: list[bytes],
) -> None:
    result, server, open_after_first = await two_deliveries(parts)
    assert (result.status, result.excerpt, result.error) == (200, "hello world", None)
    assert open_after_first == 1
    assert server.on_connection == [1, 1]


async def test_headers_are_lower_case_and_stripped_and_trailers_are_not_headers() -> None:
    answer = CHUNKED.replace(b"OK\r\n", b"OK\r\nRetry-After:   120  \r\n") + (
        b"2\r\nok\r\n0\r\nLocation: /trailer\r\n\r\n"
    )
    async with raw_server([answer]) as server, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(server.url()))
    assert (result.retry_after, result.location, result.excerpt) == ("120", None, "ok")


@pytest.mark.parametrize("status", [b"204 No Content", b"304 Not Modified"])
async def test_a_response_without_a_body_is_complete_at_its_head(status: bytes) -> None:
    """Only POSTs are sent (never HEAD), so the headers alone frame the body: a 204 or 304
    has none, ends at its head, and keeps the connection without waiting for more."""
    result, server, _ = await two_deliveries([b"HTTP/1.1 " + status + b"\r\n\r\n"])
    assert (result.excerpt, result.error) == ("", None)
    assert server.on_connection == [1, 1]


# --- responses that end the connection ----------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive, CLOSE\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok",
        OK + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok and more than the length said",
        CHUNKED + b"2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    ],
    ids=["close", "close-token", "http-1.0", "http-1.0-keep-alive", "a-second-response",
         "longer-than-length", "after-chunked"],
)  # fmt: skip
async def test_a_response_that_does_not_allow_reuse_closes_the_connection(answer: bytes) -> None:
    result, server, open_after_first = await two_deliveries([answer])
    assert (result.status, result.excerpt, result.error) == (200, "ok", None)
    assert open_after_first == 0
    assert server.on_connection == [1, 2]


async def test_a_body_framed_by_the_end_of_the_stream_arrives_split_and_is_never_reused() -> None:
    parts = [b"HTTP/1.1 200 OK\r\n\r\nhello", b" world"]

    async def hang_up_after(stream: trio.SocketStream) -> None:
        for part in parts:
            await trio.testing.wait_all_tasks_blocked()
            await stream.send_all(part)
        await stream.aclose()

    async with receiver(hang_up_after) as rx, DeliveryClient(LOOPBACK_ALLOWED) as client:
        result = await send(client, delivery(rx.url()))
        assert client.pool.open_connections() == 0
    assert (result.status, result.excerpt, result.error) == (200, "hello world", None)


# --- malformed and over-long: protocol failures, the connection dropped -------------------

HUGE = b"x" * (MAX_HEAD_BYTES + 1)


@pytest.mark.parametrize(
    "parts",
    [
        [b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\nContent-Length: 0\n\n"],
        [b"HTTP/1.1 200 OK\r\nBad Header: x\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok"],
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nok"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"],
        [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"],
        [b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ws\r\n\r\nxx"],
        [b"HTTP/1.1 200 OK\r\nX-Big: " + HUGE + b"\r\nContent-Length: 0\r\n\r\n"],
        [b"HTTP/1.1 200 OK\r\n"] + [b"X-Many: " + b"y" * 1000 + b"\r\n"] * 20,
        [b"HTTP/1.1 200 OK\r\nX-Never-Ends: "] + [b"z" * 4096] * 5,
        [b"HTTP/1.1 100 Continue\r\n\r\n" * 100] * 10,
    ],
    ids=["status-digits", "no-status", "bare-lf", "space-in-name", "nul", "bare-cr", "obs-fold",
         "two-lengths", "negative-length", "length-and-chunked", "gzip", "gzip-chunked",
         "two-codings", "101", "101-upgrade", "one-huge-header", "many-headers",
         "header-never-ends", "endless-interim"],
)  # fmt: skip
async def test_a_malformed_or_over_long_head_is_a_protocol_failure_and_closes(
    parts: list[bytes],
) -> None:
    result, server, open_after_first = await two_deliveries(parts)
    assert (result.status, result.failure) == (None, TransportFailure.PROTOCOL)
    assert open_after_first == 0
    assert server.on_connection == [1, 2]


@pytest.mark.parametrize(
    "rest",
    [
        [b"zz\r\nok\r\n0\r\n\r\n"],  # not a chunk size
        [b"fffffffffffffffffffff\r\n"],  # a chunk size that overflows
        [b"2\r\nokX\r\n0\r\n\r\n"],  # no CRLF after the chunk's data
        [b"0\r\nX-Trailer: " + HUGE + b"\r\n\r\n"],  # trailers over the limit
        [b"2\r\nok\r\n0\r\n"] + [b"X-T: " + b"t" * 4000 + b"\r\n"] * 5,
    ],
    ids=["chunk-size", "overflow", "chunk-end", "huge-trailer", "endless-trailers"],
)  # fmt: skip
async def test_a_malformed_body_is_reported_with_the_status_and_closes(rest: list[bytes]) -> None:
    result, server, open_after_first = await two_deliveries([CHUNKED, *rest])
    assert (result.status, result.failure) == (200, None)
    assert result.error is not None and result.error.startswith("reading the response body")
    assert open_after_first == 0
    assert server.on_connection == [1, 2]


# --- the reader and the framing, without a socket ---------------------------------------


def test_the_end_of_the_stream_ends_only_a_body_framed_by_it() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc")
    with pytest.raises(ResponseError, match="mid-response"):
        reader.feed(b"")
    with pytest.raises(ResponseError, match="without answering"):
        ResponseReader().feed(b"")
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\n\r\nabc")
    reader.feed(b"")
    assert (reader.complete, reader.reusable, bytes(reader.body)) == (True, False, b"abc")


FUZZ = st.binary(max_size=12) | st.sampled_from(
    [b"a\r\nX-Injected: 1", b"a\nb", b"a\rb", b" a", b"a ", b"a\tb", b"a  b", b"\xff\xfe",
     b"a\x00", b"X Y", b"X:Y", b"", b"ok", b"/a?b=%20", b"/\x7f",
     b"Host", b"host", b"Content-Length", b"Transfer-Encoding"]
)  # fmt: skip


@pytest.mark.parametrize(
    "headers",
    [
        [(b"Content-Length", b"2")],  # no Host
        [(b"Host", b"a"), (b"host", b"b"), (b"Content-Length", b"2")],
        [(b"Host", b"a")],  # no length
        [(b"Host", b"a"), (b"Content-Length", b"3")],  # not the body's
        [(b"Host", b"a"), (b"Content-Length", b"2"), (b"content-length", b"2")],
        [(b"Host", b"a"), (b"Content-Length", b"2"), (b"Transfer-Encoding", b"chunked")],
    ],
    ids=["no host", "two hosts", "no length", "wrong length", "two lengths", "chunked"],
)
def test_a_request_whose_framing_h11_would_refuse_is_never_framed(
    headers: list[tuple[bytes, bytes]],
) -> None:
    with pytest.raises(RequestError):
        frame_request(Method.POST, b"/hook", headers, b"{}")


@given(field=st.sampled_from(["name", "value", "target"]), fuzz=FUZZ)
def test_a_post_is_framed_exactly_when_h11_frames_it_and_to_the_same_bytes(
    field: str, fuzz: bytes
) -> None:
    """Nothing h11 refuses (so no injected header, no split request) is ever framed, and
    what it accepts is framed to h11's bytes. One field fuzzed, the others valid."""
    parts = {"name": b"X-Tenant", "value": b"yes", "target": b"/hook", field: fuzz}
    headers = [(b"Host", b"example.com"), (parts["name"], parts["value"]),
               (b"Content-Length", b"2")]  # fmt: skip
    conn = h11.Connection(our_role=h11.CLIENT)
    try:
        request = h11.Request(method="POST", target=parts["target"], headers=headers)
        expected = conn.send(request) + conn.send(h11.Data(data=b"{}"))
        expected += conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError:
        with pytest.raises(RequestError):
            frame_request(Method.POST, parts["target"], headers, b"{}")
        return
    assert frame_request(Method.POST, parts["target"], headers, b"{}") == expected


@given(names=st.lists(FUZZ, max_size=4), values=st.lists(FUZZ, max_size=4))
def test_many_fuzzed_headers_are_framed_exactly_when_h11_frames_them(
    names: list[bytes], values: list[bytes]
) -> None:
    """All names and all values are checked at once (request.py): several bad or good ones
    together are refused or framed exactly as h11 refuses or frames them."""
    fuzzed = [(b"X-Name-%d" % i, v) for i, v in enumerate(values)]
    fuzzed += [(n, b"yes") for n in names]
    headers = [(b"Host", b"example.com"), *fuzzed, (b"Content-Length", b"2")]
    conn = h11.Connection(our_role=h11.CLIENT)
    try:
        request = h11.Request(method="POST", target=b"/hook", headers=headers)
        expected = conn.send(request) + conn.send(h11.Data(data=b"{}"))
        expected += conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError:
        with pytest.raises(RequestError):
            frame_request(Method.POST, b"/hook", headers, b"{}")
        return
    assert frame_request(Method.POST, b"/hook", headers, b"{}") == expected


@pytest.mark.parametrize("method", list(Method))
def test_each_method_is_framed_to_h11s_bytes(method: Method) -> None:
    """A body method with its Content-Length and body; GET and DELETE with neither, which
    h11 frames (and reads back) as a request with an empty body."""
    body = b"{}" if method.carries_body else b""
    headers = [(b"Host", b"example.com"), (b"X-Tenant", b"yes")]
    if method.carries_body:
        headers.append((b"Content-Length", b"2"))
    conn = h11.Connection(our_role=h11.CLIENT)
    expected = conn.send(h11.Request(method=method.value, target=b"/hook", headers=headers))
    expected += conn.send(h11.Data(data=body)) if body else b""
    expected += conn.send(h11.EndOfMessage())
    framed = frame_request(method, b"/hook", headers, body)
    assert framed == expected
    assert framed.startswith(method.value.encode() + b" /hook HTTP/1.1\r\n")
    server = h11.Connection(our_role=h11.SERVER)
    server.receive_data(framed)
    request, end = server.next_event(), server.next_event()
    assert isinstance(request, h11.Request) and request.method == method.value.encode()
    assert isinstance(end, h11.Data if body else h11.EndOfMessage)


@pytest.mark.parametrize("method", [Method.GET, Method.DELETE])
@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ([(b"Host", b"a"), (b"Content-Length", b"0")], b""),  # a length on a bodiless method
        ([(b"Host", b"a"), (b"Content-Length", b"2")], b"{}"),
        ([(b"Host", b"a")], b"{}"),  # a body without a length
    ],
    ids=["length 0", "length and body", "body"],
)
def test_a_bodiless_method_never_frames_a_length_or_a_body(
    method: Method, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    with pytest.raises(RequestError):
        frame_request(method, b"/hook", headers, body)


@pytest.mark.parametrize("index", range(5))
def test_each_methods_vector_is_framed_to_its_exact_bytes(
    vectors: dict[str, Any], index: int
) -> None:
    """The contract vector's wire bytes: ``Host`` first, the request's headers in order,
    ``Content-Length`` last only for a body method (what client.py adds), and h11 reads
    them back as that method with that body."""
    case = vectors["requests"][index]
    method = Method(case["method"])
    body = case["body"].encode()
    headers = [(b"Host", b"hooks.example.com")]
    headers += [(name.encode(), value.encode()) for name, value in case["headers"]]
    if method.carries_body:
        headers.append((b"Content-Length", str(len(body)).encode()))
    framed = frame_request(method, b"/steeple?team=billing", headers, body)
    assert framed == case["wire"].encode("ascii")
    server = h11.Connection(our_role=h11.SERVER)
    server.receive_data(framed)
    request = server.next_event()
    assert isinstance(request, h11.Request) and request.method == method.value.encode()
    received = b""
    while not isinstance(event := server.next_event(), h11.EndOfMessage):
        assert isinstance(event, h11.Data)
        received += event.data
    assert received == body
