"""The client's HTTP layer against a real appliance process on loopback: answers as
:class:`Reply`, refusals as :class:`ApiProblem` with the problem as sent, an appliance
that is not there as :class:`ClientError`."""

from __future__ import annotations

import http.server
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.client.http import ApiProblem, Client, ClientError
from tests.e2e.harness import Appliance, create_tenant

pytestmark = pytest.mark.slow

SCHEDULE = {
    "name": "nightly",
    "cron": "0 3 * * *",
    "target_url": "http://127.0.0.1:9/",
    "payload": {"report": "nightly"},
}


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Appliance, str]]:
    data_dir = tmp_path_factory.mktemp("data")
    tenant = create_tenant(data_dir)
    app = Appliance(data_dir).start()
    try:
        yield app, tenant["api_key"]
    finally:
        app.kill(signal.SIGTERM)


@pytest.fixture
def client(appliance: tuple[Appliance, str]) -> Client:
    app, key = appliance
    return Client.from_settings(app.base_url, key)


def test_create_get_patch_with_the_etag_and_delete(client: Client) -> None:
    created = client.post("/v1/schedules", json=SCHEDULE)
    assert created.status == 201
    schedule = created.object()
    path = f"/v1/schedules/{schedule['id']}"
    assert created.headers["location"] == path
    fetched = client.get(path)
    assert fetched.etag == '"1"' and fetched.object()["name"] == "nightly"
    patched = client.patch(path, json={"name": "renamed"}, headers={"If-Match": fetched.etag})
    assert patched.object()["name"] == "renamed" and patched.etag == '"2"'
    with pytest.raises(ApiProblem) as stale:
        client.patch(path, json={"name": "again"}, headers={"If-Match": fetched.etag})
    assert stale.value.status == 412
    deleted = client.delete(path)
    assert deleted.status == 204 and deleted.json is None
    listed = client.get("/v1/schedules", params={"limit": 200}).object()
    assert schedule["id"] not in [item["id"] for item in listed["items"]]  # type: ignore[index, union-attr]


def test_a_refusal_carries_the_problem_and_every_field_error(client: Client) -> None:
    with pytest.raises(ApiProblem) as refused:
        client.post(
            "/v1/schedules", json=SCHEDULE | {"cron": "61 * * * *", "timezone": "Mars/Base"}
        )
    problem = refused.value
    assert problem.status == 422
    assert problem.type == "urn:steeple:problem:validation"
    assert {e.field for e in problem.errors} == {"cron", "timezone"}
    assert all(e.message for e in problem.errors)
    assert problem.summary.startswith("422 ")


def test_an_unknown_id_is_a_404_problem(client: Client) -> None:
    with pytest.raises(ApiProblem) as missing:
        client.get("/v1/schedules/sch_00000000000000000000000000")
    assert missing.value.status == 404
    assert missing.value.title


def test_a_wrong_key_is_a_401_problem(appliance: tuple[Appliance, str]) -> None:
    app, _key = appliance
    with pytest.raises(ApiProblem) as refused:
        Client.from_settings(app.base_url, "stk_" + "x" * 32).get("/v1/schedules")
    assert refused.value.status == 401


def test_query_parameters_repeat_and_the_stream_reads_lines(client: Client) -> None:
    client.post("/v1/schedules", json=SCHEDULE | {"name": "streamed"})
    page = client.get("/v1/events", params={"type": ["schedule.created"], "limit": 1})
    assert len(page.object()["items"]) == 1  # type: ignore[arg-type]
    with client.stream("/v1/events/stream", params={"type": ["schedule.created"]}) as lines:
        assert next(lines).startswith("retry: ")
        assert next(line for line in lines if line).startswith("id: ")


def test_a_base_url_with_a_prefix_keeps_it(appliance: tuple[Appliance, str]) -> None:
    app, key = appliance
    with pytest.raises(ApiProblem) as refused:
        Client.from_settings(app.base_url + "/behind/a/proxy/", key).get("/v1/schedules")
    assert refused.value.status == 404  # the prefix was sent: the appliance has no such path


def test_no_appliance_there_is_a_client_error_naming_the_url() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ClientError) as unreachable:
        Client.from_settings(url, "stk_key").get("/v1/schedules")
    assert not isinstance(unreachable.value, ApiProblem)
    assert str(unreachable.value) == f"cannot reach {url}/v1/schedules: connection refused"


@pytest.mark.parametrize(
    "url", ["ftp://box", "box:8080", "http://", "http://box/?q=1", "https://box/#top"]
)
def test_a_url_that_is_no_appliance_url_is_refused_up_front(url: str) -> None:
    with pytest.raises(ClientError, match="appliance URL"):
        Client.from_settings(url, "stk_key")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://box:99999", "Port out of range"),
        ("http://box:abc", "Port could not be cast"),
        ("http://[::1", "Invalid IPv6 URL"),
        ("http://exa mple", "a space, a control character or port 0"),
        ("http://box:0", "port 0"),
    ],
)
def test_a_malformed_url_is_one_line_naming_it_not_a_traceback(url: str, reason: str) -> None:
    with pytest.raises(ClientError) as refused:
        Client.from_settings(url, "stk_key")
    assert str(refused.value).startswith("the appliance URL must be http(s)://host[:port]")
    assert repr(url) in str(refused.value) and reason in str(refused.value)


def test_a_url_with_a_password_is_refused_without_printing_it() -> None:
    with pytest.raises(ClientError) as refused:
        Client.from_settings("http://ops:hunter2@box:8080/steeple", "stk_key")
    assert str(refused.value) == (
        "the appliance URL takes no user:password@: 'http://ops:…@box:8080/steeple'"
    )


def test_profiles_are_private_and_the_flag_then_environment_then_profile_decide(
    tmp_path: Path,
) -> None:
    from appliance.client.profiles import Profile, profile_path, resolve_client, write_profile

    directory = tmp_path / "config" / "steeple"
    written = write_profile(Profile(name="default", url="http://box:1", api_key="stk_p"), directory)
    write_profile(Profile(name="staging", url="http://staging:2", api_key="stk_s"), directory)
    assert written == profile_path(directory)
    assert written.stat().st_mode & 0o777 == 0o600
    assert directory.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in directory.iterdir()] == ["profiles.toml"]  # no temporary left

    def pick(url: str | None = None, profile: str | None = None, **env: str) -> tuple[str, str]:
        chosen = resolve_client(url=url, profile=profile, environ=env, directory=directory)
        return chosen.base_url, chosen.api_key

    assert pick() == ("http://box:1", "stk_p")
    assert pick(profile="staging") == ("http://staging:2", "stk_s")
    assert pick(STEEPLE_PROFILE="staging") == ("http://staging:2", "stk_s")
    assert pick(url="http://flag:3", STEEPLE_URL="http://env:4") == ("http://flag:3", "stk_p")
    assert pick(STEEPLE_URL="http://env:4", STEEPLE_API_KEY="stk_e") == ("http://env:4", "stk_e")
    with pytest.raises(ClientError, match=r"no profile 'prod'.*default, staging"):
        pick(profile="prod")
    written.chmod(0o644)
    with pytest.raises(ClientError, match="others may read it"):
        pick()


def test_without_any_profile_the_error_says_how_to_give_one(tmp_path: Path) -> None:
    from appliance.client.profiles import resolve_client

    with pytest.raises(ClientError, match="--url, set STEEPLE_URL or run `steeple login`"):
        resolve_client(url=None, profile=None, environ={}, directory=tmp_path)
    with pytest.raises(ClientError, match="STEEPLE_API_KEY"):
        resolve_client(url="http://box", profile=None, environ={}, directory=tmp_path)


def test_a_proxy_error_page_is_a_problem_made_from_its_status_line() -> None:
    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = b"<html><body>502 Bad Gateway</body></html>"
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.handle_request, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ApiProblem) as refused:
            Client.from_settings(url, "stk_key").get("/v1/schedules")
    finally:
        server.server_close()
    assert refused.value.status == 502
    assert refused.value.summary == "502 Bad Gateway: <html><body>502 Bad Gateway</body></html>"


def test_what_http_cannot_carry_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ClientError, match="printable ASCII"):
        Client.from_settings("http://127.0.0.1:9", "stk_two words")
    client = Client.from_settings("http://127.0.0.1:9", "stk_key")
    with pytest.raises(ClientError, match="cannot send GET"):
        client.get("/v1/schedules", headers={"X-Bad": "line\r\nInjected: 1"})
    assert "stk_key" not in repr(client)


def test_a_server_that_is_no_appliance_is_named_when_its_answer_is_no_json_object() -> None:
    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # an empty 200, as a plain web server may answer
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.handle_request, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(ClientError) as refused:
            Client.from_settings(url, "stk_key").get("/v1/schedules").object()
    finally:
        server.server_close()
    assert str(refused.value) == (
        f"GET {url}/v1/schedules answered 200 without the JSON object the API sends"
        " (no body): is that URL a Steeple appliance?"
    )
