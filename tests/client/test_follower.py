"""The follow loop's rules (appliance/client/events.py) against a real loopback server
that plays the appliance's stream: each reconnect carries the last id shown, waits start
at the server's ``retry`` and double while failures go on, and a 401 ends the loop."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from appliance.client.events import Follower
from appliance.client.http import ApiProblem, Client, JsonObject


@dataclass
class Script:
    """What the server answers, connection after connection, and what it was asked."""

    answers: list[tuple[int, bytes]]
    seen: list[str | None] = field(default_factory=list)  # each request's Last-Event-ID
    url: str = ""


def event(seq: int) -> bytes:
    data = json.dumps({"seq": seq, "type": "schedule.created"})
    return f"id: {seq}\nevent: schedule.created\ndata: {data}\n\n".encode()


@pytest.fixture
def script() -> Iterator[Script]:
    script = Script(
        answers=[
            (200, b"retry: 250\n\n" + event(1) + event(2)),  # then the server ends it
            (503, b'{"title": "Service Unavailable", "status": 503}'),
            (429, b'{"title": "Too many streams", "status": 429}'),
            (200, b": heartbeat\n\n" + event(3)),
            (401, b'{"title": "Authentication required", "status": 401}'),
        ]
    )

    class Stream(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            script.seen.append(self.headers.get("Last-Event-ID"))
            status, body = script.answers.pop(0)
            kind = "text/event-stream" if status == 200 else "application/problem+json"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield script
    server.shutdown()
    server.server_close()


def test_reconnects_resume_after_the_last_event_and_back_off_until_a_401(
    script: Script,
) -> None:
    shown: list[JsonObject] = []
    waits: list[float] = []
    notices: list[str] = []
    follower = Follower(
        client=Client.from_settings(script.url, "stk_key"),
        params={},
        last_seq=None,
        show=shown.append,
        notice=notices.append,
        sleep=waits.append,
    )
    with pytest.raises(ApiProblem) as ended:
        follower.run()
    assert ended.value.status == 401
    assert [e["seq"] for e in shown] == [1, 2, 3]
    assert script.seen == [None, "2", "2", "2", "3"]
    # 250 ms from the server's `retry:`, doubled on each failure in a row, and back to the
    # start once a stream opened again.
    assert waits == [0.25, 0.5, 1.0, 0.25]
    assert "503 Service Unavailable" in notices[1] and "after #2" in notices[1]
