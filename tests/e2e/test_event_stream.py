"""``GET /v1/events/stream`` against the real appliance over loopback: every event arrives
once across a client reconnect and an appliance restart, a stream whose client stays is
never cut, and shutdown ends streams cleanly."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from appliance.api import serving
from tests.e2e.harness import Appliance, create_tenant

pytestmark = pytest.mark.slow


class Stream:
    """One SSE connection read in a thread (``http.client``: its socket can be shut down
    from the test's thread, which ends a blocked read at once)."""

    def __init__(self, app: Appliance, api_key: str, last_event_id: int | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.messages: list[dict[str, Any]] = []
        self.ended = threading.Event()
        self.clean_end = False  # the server ended the response (last chunk), no reset
        self._changed = threading.Condition()
        url = urlsplit(app.base_url)
        self._conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=60)
        self._conn.request("GET", "/v1/events/stream", headers=headers)
        response = self._conn.getresponse()
        assert response.status == 200, response.read()
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        self._thread = threading.Thread(target=self._read, args=(response,), daemon=True)
        self._thread.start()

    def _read(self, response: http.client.HTTPResponse) -> None:
        fields: dict[str, str] = {}
        try:
            while line := response.readline():
                text = line.decode().rstrip("\n")
                if text == "" and "id" in fields:
                    with self._changed:
                        self.messages.append(fields)
                        self._changed.notify_all()
                if text == "":
                    fields = {}
                elif not text.startswith(":"):
                    name, _, value = text.partition(": ")
                    fields[name] = value
            self.clean_end = True
        except (OSError, http.client.HTTPException):
            pass  # shut down by close()
        finally:
            self.ended.set()
            with self._changed:
                self._changed.notify_all()

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 20
    ) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.messages):
                left = deadline - time.monotonic()
                assert left > 0 and not self.ended.is_set(), f"stream has {self.messages}"
                self._changed.wait(left)

    def ids(self) -> list[int]:
        return [int(m["id"]) for m in self.messages]

    def close(self) -> None:
        if self._conn.sock is not None:
            self._conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)
        assert not self._thread.is_alive()
        self._conn.close()


@pytest.fixture
def tenant(tmp_path: Path) -> dict[str, str]:
    return create_tenant(tmp_path)


def create_schedules(app: Appliance, api_key: str, count: int, prefix: str) -> list[str]:
    ids = []
    with app.client(api_key) as api:
        for n in range(count):
            body = {
                "name": f"{prefix}-{n}",
                "cron": "0 3 * * *",
                "target_url": "http://127.0.0.1:9/",
                "payload": {"n": n},
            }
            reply = api.post("/v1/schedules", json=body)
            assert reply.status_code == 201, reply.text
            ids.append(reply.json()["id"])
    return ids


def test_a_stream_resumes_across_a_reconnect_and_a_restart_with_nothing_lost_or_repeated(
    tmp_path: Path, tenant: dict[str, str]
) -> None:
    key = tenant["api_key"]
    app = Appliance(tmp_path).start()
    stream = Stream(app, key)
    try:
        first = create_schedules(app, key, 3, "a")
        stream.wait_for(lambda ms: len(ms) == 3)
        assert [json.loads(m["data"])["schedule_id"] for m in stream.messages] == first
        assert {m["event"] for m in stream.messages} == {"schedule.created"}
        stream.close()
        last_seen = stream.ids()[-1]
        second = create_schedules(app, key, 2, "b")  # while no stream is attached
        resumed = Stream(app, key, last_event_id=last_seen)
        resumed.wait_for(lambda ms: len(ms) == 2)
        assert [json.loads(m["data"])["schedule_id"] for m in resumed.messages] == second
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        resumed.ended.wait(10)
        assert resumed.ended.is_set(), "the stream outlived the appliance's shutdown"
        resumed.close()
        last_seen = resumed.ids()[-1]
        app = Appliance(tmp_path).start()
        third = create_schedules(app, key, 2, "c")
        after_restart = Stream(app, key, last_event_id=last_seen)
        # The restart's downtime report is a system event: every tenant's stream has it.
        after_restart.wait_for(lambda ms: len(ms) == 3)
        live = create_schedules(app, key, 1, "d")
        after_restart.wait_for(lambda ms: len(ms) == 4)
        events = [json.loads(m["data"]) for m in after_restart.messages]
        got = [e["schedule_id"] for e in events if e["type"] == "schedule.created"]
        assert got == third + live
        assert [e["type"] for e in events].count("appliance.restarted") == 1
        every_id = stream.ids() + resumed.ids() + after_restart.ids()
        assert every_id == sorted(set(every_id)), "an event was repeated or out of order"
        after_restart.close()
    finally:
        app.kill(signal.SIGTERM)


def test_shutdown_ends_an_attached_stream_promptly(tmp_path: Path, tenant: dict[str, str]) -> None:
    app = Appliance(tmp_path).start()
    stream = Stream(app, tenant["api_key"])
    try:
        create_schedules(app, tenant["api_key"], 1, "a")
        stream.wait_for(lambda ms: len(ms) == 1)
        started = time.monotonic()
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        stopped_in = time.monotonic() - started
        assert stream.ended.wait(5)
        assert stream.clean_end, "the stream was cut off instead of ended"
        print(f"[stream] shutdown with a stream attached took {stopped_in:.2f} s")
    finally:
        stream.close()
        app.kill(signal.SIGTERM)


def test_a_stream_whose_client_stays_outlives_the_read_timeout(
    tmp_path: Path, tenant: dict[str, str]
) -> None:
    app = Appliance(tmp_path).start()
    stream = Stream(app, tenant["api_key"])  # its client sends nothing after the request
    try:
        beyond = serving.READ_TIMEOUT_S + 5
        assert not stream.ended.wait(beyond), f"the stream was cut within {beyond} s"
        create_schedules(app, tenant["api_key"], 1, "late")
        stream.wait_for(lambda ms: len(ms) == 1)  # and it still carries events
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        assert stream.ended.wait(5)
        assert stream.clean_end, "the stream was cut off instead of ended"
    finally:
        stream.close()
        app.kill(signal.SIGTERM)
