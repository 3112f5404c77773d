"""The bytes on the wire: the delivery client frames its requests itself, and they are byte
for byte what httpx would send for the same request (httpx is a test dependency only)."""

from __future__ import annotations

import h11
import httpx
import pytest
import trio
import trio.testing
from hypothesis import example, given
from hypothesis import strategies as st

from appliance.core.addresses import AddressPolicy, check_target_url
from appliance.core.schedules import Method
from appliance.engine.delivery import DeliveryClient, send
from appliance.engine.delivery.target import parse_target
from appliance.errors import ValidationError
from tests.engine.loopback import (
    LOOPBACK_ALLOWED,
    delivery,
    fake_dns,
    keep_alive_server,
    response,
    serving,
)


def as_httpx_sends(
    method: str, url: str, headers: tuple[tuple[str, str], ...], body: bytes
) -> bytes:
    """The request httpx builds, framed the way its transport frames it (h11 over the
    ``Request``'s target and raw headers)."""
    request = httpx.Request(method, url, headers=headers, content=body)
    conn = h11.Connection(our_role=h11.CLIENT)
    head = conn.send(
        h11.Request(method=method, target=request.url.raw_path, headers=request.headers.raw)
    )
    return head + conn.send(h11.Data(data=request.content)) + conn.send(h11.EndOfMessage())


@pytest.mark.parametrize("host", ["127.0.0.1", "hooks.example"])
async def test_the_client_sends_the_bytes_httpx_would(host: str) -> None:
    """``Host`` first (with the port), the delivery's headers in order, ``Content-Length``
    last, then the body."""
    resolve = fake_dns({"hooks.example": ["127.0.0.1"]})
    async with (
        keep_alive_server() as server,
        DeliveryClient(LOOPBACK_ALLOWED, resolve=resolve) as client,
    ):
        request = delivery(server.url(host) + "?a=1&b=%20")
        assert (await send(client, request)).status == 200
    [raw] = server.raw
    assert raw == as_httpx_sends("POST", request.url, request.headers, request.body)
    head = raw.split(b"\r\n")
    assert head[0] == b"POST /hook?a=1&b=%20 HTTP/1.1"
    assert head[1] == f"Host: {host}:{server.port}".encode()
    assert head[-3] == f"Content-Length: {len(request.body)}".encode()


@pytest.mark.parametrize("method", list(Method))
async def test_each_method_goes_out_as_httpx_would_send_it(method: Method) -> None:
    """PUT and PATCH as a POST is, with their method; GET and DELETE with no body, no
    ``Content-Type`` and no ``Content-Length`` (RFC 9110 §8.6), as httpx frames them."""
    async with (
        keep_alive_server() as server,
        DeliveryClient(LOOPBACK_ALLOWED, resolve=fake_dns({})) as client,
    ):
        request = delivery(server.url("127.0.0.1"), method=method)
        assert (await send(client, request)).status == 200
        again = delivery(server.url("127.0.0.1"), method=method)  # the kept-alive connection
        assert (await send(client, again)).status == 200
    first, second = server.raw
    assert first == second == as_httpx_sends(method, request.url, request.headers, request.body)
    head, _, body = first.partition(b"\r\n\r\n")
    assert head.startswith(f"{method} /hook HTTP/1.1\r\n".encode())
    framed = b"content-length:" in head.lower()
    assert framed is method.carries_body and (body != b"") is method.carries_body


async def test_a_body_larger_than_the_socket_takes_at_once_arrives_whole() -> None:
    """The receiver reads nothing until the client is blocked writing (the kernel's buffers
    full), so the request goes out in many writes; it arrives byte for byte."""
    arrived = bytearray()

    async def handle(stream: trio.SocketStream) -> None:
        await trio.testing.wait_all_tasks_blocked()  # the client waits to write more
        while not arrived.endswith(body):
            arrived.extend(await stream.receive_some(1 << 20))
        await stream.send_all(response())

    body = bytes(range(256)) * (64 * 1024)  # 16 MiB: more than loopback buffers hold
    async with serving(handle) as port, DeliveryClient(LOOPBACK_ALLOWED) as client:
        request = delivery(f"http://127.0.0.1:{port}/hook", body=body)
        assert (await send(client, request)).status == 200
    assert bytes(arrived) == as_httpx_sends("POST", request.url, request.headers, body)


HOSTS = ["example.com", "EXAMPLE.com", "bücher.example", "Straße.de", "xn--bcher-kva.example",
         "8.8.8.8", "[2606:4700::1]", "[2606:4700::ABCD]", "hooks.example."]  # fmt: skip
PATH_CHARS = st.characters(codec="utf-8", exclude_characters="#?\x7f", min_codepoint=0x21)


@given(
    scheme=st.sampled_from(["http", "https", "HTTP"]),
    host=st.sampled_from(HOSTS),
    port=st.sampled_from(["", ":80", ":443", ":8080"]),
    path=st.text(PATH_CHARS, max_size=30).map(lambda p: "/" + p),
    query=st.none() | st.text(PATH_CHARS | st.just("?"), max_size=20),
)
@example(scheme="http", host="example.com", port="", path="/a/./b/../c", query=None)
@example(scheme="http", host="example.com", port="", path="/", query="")
def test_targets_parse_to_what_httpx_would_send(
    scheme: str, host: str, port: str, path: str, query: str | None
) -> None:
    url = f"{scheme}://{host}{port}{path}" + ("" if query is None else f"?{query}")
    try:
        check_target_url(url, AddressPolicy())
    except ValidationError:
        return  # never reaches the client
    # httpx keeps a default port written after an upper-case scheme (``HTTP://h:80/``);
    # the client drops it whatever the scheme's case, so compare with the lower-case form.
    target, theirs = parse_target(url), httpx.URL(scheme.lower() + url[len(scheme) :])
    assert target.netloc == theirs.netloc
    assert target.path == theirs.raw_path
    assert target.origin == (theirs.scheme, theirs.raw_host.decode(), theirs.port or
                             {"http": 80, "https": 443}[theirs.scheme])  # fmt: skip
