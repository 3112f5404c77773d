"""``steeple schedules|runs|events|login`` end to end: the CLI as a subprocess against a
real appliance process on loopback, a schedule through its whole life, the exit codes a
script relies on, and the profile ``login`` writes."""

from __future__ import annotations

import http.server
import json
import signal
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.cli import Lines, environment, ok_json, run
from tests.e2e.harness import Action, Appliance, Receiver, create_tenant

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Appliance, dict[str, str]]]:
    data_dir = tmp_path_factory.mktemp("data")
    tenant = create_tenant(data_dir)
    app = Appliance(data_dir).start()
    try:
        yield app, tenant
    finally:
        app.kill(signal.SIGTERM)


@pytest.fixture
def env(box: tuple[Appliance, dict[str, str]], tmp_path: Path) -> dict[str, str]:
    app, tenant = box
    return environment(tmp_path, STEEPLE_URL=app.base_url, STEEPLE_API_KEY=tenant["api_key"])


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    endpoint = Receiver()
    yield endpoint
    endpoint.close()


def test_a_schedule_through_its_life(env: dict[str, str], receiver: Receiver) -> None:
    created = run(
        env, "schedules", "create", "--name", "nightly", "--cron", "0 3 * * *",
        "--timezone", "Europe/Paris", "--target-url", receiver.url,
        "--payload", '{"report": "nightly"}', "--header", "X-Team: ops",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stderr == ""  # no database named: the client opens none
    schedule_id = created.stdout.split()[1]
    assert created.stdout.startswith(f"created {schedule_id}\n")
    assert "  X-Team: ops" in created.stdout.splitlines()

    listed = run(env, "schedules", "list")
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["ID", "KEY", "NAME", "STATUS", "TIMING", "NEXT", "METHOD", "TARGET"]
    (row,) = [r for r in rows if r.startswith(schedule_id)]
    assert "-    nightly  active  0 3 * * * Europe/Paris" in row  # no key: "-"
    assert f"POST    {receiver.url}" in row
    page = ok_json(env, "schedules", "list", "--all")
    assert schedule_id in [s["id"] for s in page["items"]] and page["next_cursor"] is None

    got = ok_json(env, "schedules", "get", schedule_id)
    assert got["payload"] == {"report": "nightly"} and got["headers"] == {"X-Team": "ops"}
    assert ok_json(env, "schedules", "pause", schedule_id, "--note", "moving")["status"] == "paused"
    resumed = run(env, "schedules", "resume", schedule_id)
    assert resumed.stdout == f"resumed {schedule_id} (nightly)\n"

    run_doc = ok_json(env, "schedules", "trigger", schedule_id)
    assert run_doc["trigger"] == "manual" and run_doc["schedule_id"] == schedule_id
    receiver.wait_for(lambda ds: any(d.run_id == run_doc["id"] for d in ds))
    runs = ok_json(env, "schedules", "runs", schedule_id)
    assert run_doc["id"] in [r["id"] for r in runs["items"]]
    table = run(env, "schedules", "runs", schedule_id).stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "SCHEDULED", "FOR"]

    detail = run(env, "runs", "get", run_doc["id"])
    assert detail.returncode == 0
    assert f"schedule_id       {schedule_id}" in detail.stdout
    assert "\nattempts\n#  STARTED" in detail.stdout
    full = ok_json(env, "runs", "get", run_doc["id"])
    assert full["id"] == run_doc["id"] and isinstance(full["attempts"], list)

    deleted = run(env, "schedules", "delete", schedule_id)
    assert (deleted.returncode, deleted.stdout) == (0, f"deleted {schedule_id}\n")
    gone = run(env, "schedules", "get", schedule_id)
    assert gone.returncode == 1 and gone.stdout == ""
    assert gone.stderr.startswith("steeple: refused: 404 ")


def test_edit_changes_one_header_and_the_timing_kind(env: dict[str, str]) -> None:
    body = {
        "name": "edited",
        "cron": "0 3 * * *",
        "target_url": "http://127.0.0.1:9/",
        "payload": {},
        "headers": {"X-Keep": "1", "X-Drop": "2"},
    }
    created = run(env, "schedules", "create", "--from-json", "-", "--json", stdin=json.dumps(body))
    assert created.returncode == 0, created.stderr
    schedule_id = json.loads(created.stdout)["id"]
    edited = ok_json(
        env, "schedules", "edit", schedule_id, "--every", "15m",
        "--header", "X-New: 3", "--remove-header", "x-drop",
    )  # fmt: skip
    assert edited["headers"] == {"X-Keep": "1", "X-New": "3"}
    assert edited["every_seconds"] == 900 and edited["cron"] is None
    assert edited["version"] == 2
    nothing = run(env, "schedules", "edit", schedule_id)
    assert nothing.returncode == 2 and "give a field to change" in nothing.stderr


def test_a_refusal_prints_the_problem_and_each_field_error_and_exits_1(
    env: dict[str, str],
) -> None:
    refused = run(
        env, "schedules", "create", "--name", "bad", "--cron", "61 * * * *",
        "--timezone", "Mars/Base", "--target-url", "http://127.0.0.1:9/", "--payload", "{}",
    )  # fmt: skip
    assert refused.returncode == 1 and refused.stdout == ""
    first, *errors = refused.stderr.splitlines()
    assert first.startswith("steeple: refused: 422 ")
    assert [e.split(":")[0] for e in errors] == ["  cron", "  timezone"]
    as_json = run(env, "runs", "get", "run_nope", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["status"] == 404  # scripts read the problem itself


@pytest.mark.parametrize(
    "args",
    [
        ("schedules", "bogus"),
        ("schedules", "get"),
        ("schedules", "create", "--cron", "* * * * *", "--every", "1m"),
        ("schedules", "create", "--payload", "{not json"),
        ("schedules", "create", "--header", "no-colon"),
        ("schedules", "list", "--limit", "many"),
    ],
)
def test_a_wrong_command_line_exits_2_and_sends_nothing(
    env: dict[str, str], args: tuple[str, ...]
) -> None:
    before = ok_json(env, "events", "--all")["next_cursor"]
    done = run(env, *args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "error" in done.stderr
    assert ok_json(env, "events", "--all")["next_cursor"] == before


def test_login_saves_a_private_profile_that_later_commands_use(
    box: tuple[Appliance, dict[str, str]], tmp_path: Path
) -> None:
    app, tenant = box
    env = environment(tmp_path / "home")  # no STEEPLE_URL, no STEEPLE_API_KEY
    profile = tmp_path / "home" / "steeple" / "profiles.toml"
    (tmp_path / "wrong").write_text("stk_" + "x" * 32 + "\n")
    refused = run(env, "login", "--url", app.base_url, "--key-file", str(tmp_path / "wrong"))
    assert refused.returncode == 1 and "401" in refused.stderr
    assert not profile.exists()  # a key that does not work is not saved
    assert refused.stderr.splitlines()[-1] == "steeple: profile 'default' not saved"
    absent = run(env, "login", "--url", app.base_url, "--key-file", str(tmp_path / "absent"))
    assert absent.returncode == 2 and absent.stderr == (
        f"steeple: error: --key-file: cannot read {tmp_path / 'absent'}:"
        " No such file or directory\n"
    )

    (tmp_path / "key").write_text(tenant["api_key"] + "\n")
    done = run(env, "login", "--url", app.base_url, "--key-file", str(tmp_path / "key"))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(profile.stat().st_mode) == 0o600
    assert tenant["api_key"] in profile.read_text()
    assert run(env, "schedules", "list").returncode == 0
    via_stdin = run(env, "login", "--url", app.base_url, "--key-file", "-", "--profile", "box",
                    stdin=tenant["api_key"])  # fmt: skip
    assert via_stdin.returncode == 0, via_stdin.stderr
    assert run(env, "schedules", "list", "--profile", "box").returncode == 0
    missing = run(env, "schedules", "list", "--profile", "prod")
    assert missing.returncode == 1 and "no profile 'prod'" in missing.stderr


def test_events_lists_the_feed_and_follow_streams_it_until_ctrl_c(env: dict[str, str]) -> None:
    created = ok_json(env, "schedules", "create", "--name", "watched", "--every", "1h",
                      "--target-url", "http://127.0.0.1:9/", "--payload", "{}")  # fmt: skip
    feed = ok_json(env, "events", "--all", "--type", "schedule.created")
    assert created["id"] in [e["schedule_id"] for e in feed["items"]]
    lines = run(env, "events", "--all", "--schedule", created["id"]).stdout.splitlines()
    assert len(lines) == 1 and " schedule.created  " + created["id"] in lines[0]

    follow = Lines(env, "events", "--follow", "--json", "--after", str(feed["next_cursor"]))
    try:
        run(env, "schedules", "pause", created["id"])
        event = follow.next_json()
        assert (event["type"], event["schedule_id"]) == ("schedule.paused", created["id"])
        assert event["seq"] > feed["next_cursor"]
        code, err = follow.stop(signal.SIGINT)
    finally:
        follow.close()
    assert (code, err) == (0, "")  # Ctrl-C ends a follow quietly


def wait_for_state(env: dict[str, str], run_id: str, state: str) -> dict[str, Any]:
    """The run once it is in ``state``, read with `runs get` (a deadline, not a sleep)."""
    deadline = time.monotonic() + 30
    while (found := ok_json(env, "runs", "get", run_id))["state"] != state:
        assert time.monotonic() < deadline, found
        time.sleep(0.1)
    return found


def test_failed_runs_are_listed_and_replayed(env: dict[str, str]) -> None:
    refusing = Receiver(respond=lambda _d: Action(status=500))
    try:
        body = {
            "name": "refused",
            "cron": "0 3 * * *",
            "target_url": refusing.url,
            "payload": {},
            "retry": {"max_attempts": 1},
        }
        created = run(env, "schedules", "create", "--from-json", "-", "--json",
                      stdin=json.dumps(body))  # fmt: skip
        schedule_id = json.loads(created.stdout)["id"]
        run_id = ok_json(env, "schedules", "trigger", schedule_id)["id"]
        failed = wait_for_state(env, run_id, "failed")
        assert failed["attempts"][0]["http_status"] == 500

        listed = ok_json(env, "runs", "failed", "--schedule", schedule_id)
        assert [r["id"] for r in listed["items"]] == [run_id]
        table = run(env, "runs", "failed", "--schedule", schedule_id).stdout.splitlines()
        assert table[1].startswith(run_id) and "  failed  " in table[1]

        replayed = ok_json(env, "schedules", "replay", schedule_id)
        assert replayed["matched"] == 1 and replayed["replayed"] == 1
        refusing.wait_for(lambda ds: len([d for d in ds if d.run_id == run_id]) == 2)
        wait_for_state(env, run_id, "failed")
        again = ok_json(env, "runs", "replay", run_id)
        assert again["replayed"] == 1
        unknown = run(env, "runs", "replay", run_id, "run_nope")  # all or none: refused
        assert unknown.returncode == 1 and "404" in unknown.stderr and "run_nope" in unknown.stderr
    finally:
        refusing.close()


def test_follow_with_a_refused_key_ends_at_once_with_1(env: dict[str, str]) -> None:
    """A 401 is not waited out: retrying cannot make the key work."""
    done = run(env | {"STEEPLE_API_KEY": "stk_" + "x" * 32}, "events", "--follow")
    assert done.returncode == 1
    assert done.stderr.startswith("steeple: refused: 401 ") and "reconnecting" not in done.stderr


def test_a_create_says_its_timing_warnings_on_stderr_only(env: dict[str, str]) -> None:
    args = ["schedules", "create", "--name", "month-end", "--cron", "0 0 31 * *",
            "--target-url", "http://127.0.0.1:9/", "--payload", "{}", "--json"]  # fmt: skip
    done = run(env, *args)
    assert done.returncode == 0, done.stderr
    codes = [w["code"] for w in json.loads(done.stdout)["warnings"]]
    assert "day_skips_months" in codes
    assert "warning: day_skips_months: " in done.stderr


def test_an_empty_file_with_prune_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    # Port 9 (discard) on loopback: nothing listens, and the refusal comes first, so the
    # exit is the refusal's and not "cannot reach".
    env = environment(tmp_path, STEEPLE_URL="http://127.0.0.1:9", STEEPLE_API_KEY="stk_x")
    for stdin in ("", "# a comment, no schedule\n"):
        done = run(env, "apply", "-f", "-", "--prune", stdin=stdin)
        assert done.returncode == 1
        assert done.stderr.startswith("steeple: <stdin> lists no schedule: with --prune that")
    without_prune = run(env, "apply", "-f", "-", stdin="")
    assert "cannot reach http://127.0.0.1:9" in without_prune.stderr  # no guard needed


def test_login_to_a_server_that_is_no_appliance_saves_nothing(tmp_path: Path) -> None:
    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # any web server's empty 200 on a port given by mistake
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.handle_request, daemon=True).start()
    env = environment(tmp_path / "home")
    (tmp_path / "key").write_text("stk_" + "x" * 32 + "\n")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = run(env, "login", "--url", url, "--key-file", str(tmp_path / "key"))
    finally:
        server.server_close()
    assert done.returncode == 1
    assert "is that URL a Steeple appliance?" in done.stderr
    assert done.stderr.splitlines()[-1] == "steeple: profile 'default' not saved"
    assert not (tmp_path / "home" / "steeple" / "profiles.toml").exists()


def test_export_to_a_path_that_cannot_be_written_is_one_line_and_exit_1(
    env: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "missing" / "schedules.toml"
    done = run(env, "export", "-o", str(target))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"steeple: error: cannot write {target}: No such file or directory\n"
    assert not (tmp_path / "missing").exists()
