"""Streams a client leaves are noticed within seconds and their sockets released, on the
API's ``/v1/events/stream`` and the UI's ``/events/stream``, against a real appliance
process: whatever the client sent after its request (a blank line, a pipelined request)
and however it left (close, reset, half-close). The appliance's open descriptors come
back to where they were (``/proc/<pid>/fd``), polled with a deadline."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.e2e.harness import Appliance, create_tenant
from tests.e2e.streams import (
    API_STREAM,
    LEAVES,
    UI_STREAM,
    Leave,
    open_stream,
    settled_fds,
    stream_request,
    wait_for_fds,
)
from tests.ui.test_browser import add_user
from tests.ui.test_live_feed import sign_in

pytestmark = pytest.mark.slow

STREAMS = 30  # left behind per case
SLACK = 3  # descriptors the appliance may open meanwhile (a reader, the log)


@dataclass(frozen=True)
class Running:
    app: Appliance
    heads: dict[str, bytes]  # the stream's request head, by path


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    data_dir = tmp_path_factory.mktemp("abandoned") / "data"
    key = create_tenant(data_dir, "acme")["api_key"]
    add_user(data_dir, "viewer@acme.example", "acme", "viewer")
    app = Appliance(data_dir).start()
    try:
        cookie = sign_in(app.base_url, "viewer@acme.example")
        heads = {
            API_STREAM: stream_request(API_STREAM, key=key),
            UI_STREAM: stream_request(UI_STREAM, cookie=cookie),
        }
        for head in heads.values():  # warm: each stream's first request opens readers
            open_stream(app.base_url, head).close()
        yield Running(app, heads)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)


@pytest.mark.parametrize("path", [API_STREAM, UI_STREAM])
@pytest.mark.parametrize(
    ("extra", "leave"), [(e, f) for _, e, f in LEAVES], ids=[n for n, *_ in LEAVES]
)
def test_a_stream_left_behind_releases_its_socket_within_seconds(
    running: Running, path: str, extra: bytes, leave: Leave
) -> None:
    pid = running.app.pid
    baseline = settled_fds(pid)
    head = running.heads[path]
    kept = [leave(open_stream(running.app.base_url, head, extra)) for _ in range(STREAMS)]
    try:
        held = wait_for_fds(pid, baseline + SLACK)
        assert held <= baseline + SLACK, (
            f"{held - baseline} descriptors still open 10 s after {STREAMS} streams were left"
        )
    finally:
        for sock in kept:
            if sock is not None:
                sock.close()
