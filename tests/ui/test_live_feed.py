"""``/events/stream``: the UI's live feed over real HTTP against an appliance process,
authenticated by the session cookie — the same stream function and hub as the API's
``GET /v1/events/stream``. Reads block on the socket with a deadline; nothing sleeps."""

from __future__ import annotations

import http.client
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.harness import Appliance, create_tenant, sign_in_form
from tests.ui.test_browser import PASSWORD, add_user

pytestmark = pytest.mark.slow


def sign_in(base_url: str, email: str) -> str:
    """The session cookie's value after a real sign-in."""
    with httpx.Client(base_url=base_url, trust_env=False, timeout=30) as client:
        answer = sign_in_form(client, email, PASSWORD)
        assert answer.status_code == 302, answer.text
        return answer.cookies["steeple_session"]


def read_until(response: http.client.HTTPResponse, wanted: str) -> list[str]:
    """Lines of the stream up to the first that equals ``wanted`` (socket timeout: 30 s)."""
    lines = []
    while line := response.readline():
        text = line.decode().rstrip("\n")
        lines.append(text)
        if text == wanted:
            return lines
    raise AssertionError(f"the stream ended before {wanted!r}: {lines}")


def test_the_events_page_stream_follows_the_tenant_feed_with_a_session(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    tenant = create_tenant(data_dir, "acme")
    other = create_tenant(data_dir, "beta")
    add_user(data_dir, "viewer@acme.example", "acme", "viewer")
    app = Appliance(data_dir).start()
    try:
        cookie = sign_in(app.base_url, "viewer@acme.example")
        page = httpx.get(
            f"{app.base_url}/events", cookies={"steeple_session": cookie}, trust_env=False
        )
        assert 'data-stream="/events/stream?after=' in page.text
        assert "schedule.run.succeeded" in page.text  # the types the page listens for

        url = urlsplit(app.base_url)
        anonymous = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
        anonymous.request("GET", "/events/stream")
        refused = anonymous.getresponse()
        assert refused.status == 302 and refused.getheader("Location", "").startswith("/login")
        anonymous.close()

        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
        conn.request(
            "GET", "/events/stream?after=0", headers={"Cookie": f"steeple_session={cookie}"}
        )
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        assert response.getheader("Content-Security-Policy")  # a UI answer
        assert read_until(response, "")[0].startswith("retry: ")
        body = {"cron": "0 * * * *", "target_url": "http://127.0.0.1:9/x", "payload": {}}
        with app.client(other["api_key"]) as api:  # another tenant's event: not ours
            theirs = api.post("/v1/schedules", json=body | {"name": "theirs"})
            assert theirs.status_code == 201
        with app.client(tenant["api_key"]) as api:  # after the stream opened: live
            created = api.post("/v1/schedules", json=body | {"name": "ours"})
            assert created.status_code == 201
        lines = read_until(response, "event: schedule.created")
        data = read_until(response, "")[-2]
        assert data.startswith("data: ") and created.json()["id"] in data
        assert not any(theirs.json()["id"] in line for line in [*lines, data])
        conn.close()
    finally:
        app.kill()
