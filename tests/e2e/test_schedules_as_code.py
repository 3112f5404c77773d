"""``steeple apply`` and ``steeple export`` as subprocesses against a real appliance on
loopback: apply, change the file, apply again (the field diff, the cursor kept: every
second delivered once, none replayed, none missed), re-apply unchanged (nothing to
change, nothing written), prune (only what the file lost), a bad file (every problem by
line, nothing changed), and export then apply (a no-op)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from appliance.core.instants import parse_instant
from tests.client.test_export_apply import schedule_documents
from tests.e2e.harness import Appliance, Receiver, create_tenant, error_lines, iter_pages, steeple

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def schedules_file(receiver: Receiver, *, tick_name: str, team: str, with_gone: bool) -> str:
    text = f"""\
    [[schedule]]
    key = "tick"
    name = "{tick_name}"
    cron = "* * * * * *"
    target_url = "{receiver.url}"
    payload = {{ team = "{team}" }}
    headers = {{ Authorization = "Bearer ${{TICK_TOKEN}}", X-Team = "{team}" }}

    [[schedule]]
    key = "nightly"
    name = "Nightly rollup"
    cron = "0 3 * * *"
    timezone = "Europe/Berlin"
    target_url = "{receiver.url}"
    method = "GET"
    """
    if with_gone:
        text += f"""
    [[schedule]]
    key = "gone"
    name = "Soon removed"
    every_seconds = 3600
    target_url = "{receiver.url}"
    payload = {{}}
    """
    return textwrap.dedent(text)


def seconds(receiver: Receiver, schedule_id: str) -> list[int]:
    return [
        parse_instant(d.scheduled_for) for d in receiver.snapshot() if d.schedule_id == schedule_id
    ]


def test_apply_change_prune_refuse_and_export(tmp_path: Path, receiver: Receiver) -> None:
    data = tmp_path / "data"
    tenant = create_tenant(data)
    app = Appliance(data).start()
    env = {"STEEPLE_URL": app.base_url, "STEEPLE_API_KEY": tenant["api_key"],
           "TICK_TOKEN": "s3cret", "XDG_CONFIG_HOME": str(tmp_path / "config")}  # fmt: skip
    path = tmp_path / "schedules.toml"

    def apply(*flags: str, file: Path = path) -> Any:
        return steeple("apply", "-f", str(file), *flags, env=env)

    try:
        with app.client(tenant["api_key"]) as api:
            unkeyed = api.post("/v1/schedules", json={
                "name": "by hand", "cron": "0 5 * * *", "target_url": receiver.url,
                "payload": {}}).json()  # fmt: skip

            def stored() -> dict[str, dict[str, Any]]:
                return {s["key"] or s["id"]: s for s in iter_pages(api, "/v1/schedules")}

            path.write_text(schedules_file(receiver, tick_name="Tick", team="ops", with_gone=True))
            done = apply()
            assert done.returncode == 0, done.stderr
            created = [line for line in done.stdout.splitlines() if line.startswith("+ ")]
            assert created == ["+ tick", "+ nightly", "+ gone"]
            assert f"  POST {receiver.url}" in done.stdout  # each create says what it sends
            assert "1 schedule(s) without a key left alone" in done.stdout
            tick = stored()["tick"]
            assert tick["headers"]["Authorization"] == "Bearer s3cret"
            receiver.wait_for(lambda ds: len(seconds(receiver, tick["id"])) >= 3)

            # a change that keeps the timing: the diff per field, the cursor kept
            path.write_text(
                schedules_file(receiver, tick_name="Tick, renamed", team="dev", with_gone=True)
            )
            done = apply()
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines()[:5] == [
                f"~ tick ({tick['id']})",
                '  name: "Tick" → "Tick, renamed"',
                '  payload: {"team": "ops"} → {"team": "dev"}',
                '  headers.X-Team: "ops" → "dev"',
                "= 2 unchanged",
            ]  # a new body re-plans the runs not yet due; the cursor is kept
            changed_at = len(seconds(receiver, tick["id"]))
            receiver.wait_for(lambda ds: len(seconds(receiver, tick["id"])) >= changed_at + 3)
            renamed = receiver.snapshot()[-1]
            assert renamed.headers["x-team"] == "dev" and renamed.body == b'{"team":"dev"}'

            # unchanged: says so and writes nothing
            before = stored()
            done = apply()
            assert done.returncode == 0, done.stderr
            assert "nothing to change" in done.stdout and "= 3 unchanged" in done.stdout
            after = stored()
            assert {k: s["version"] for k, s in after.items()} == {
                k: s["version"] for k, s in before.items()
            }

            # a bad file: every problem by line, nothing changed
            bad = tmp_path / "bad.toml"
            bad.write_text(
                path.read_text()
                .replace('cron = "0 3 * * *"', 'cron = "0 3 * *"')
                .replace("${TICK_TOKEN}", "${MISSING_TOKEN}")
            )
            done = apply(file=bad)
            assert done.returncode == 1
            assert error_lines(done.stderr)[:1] == [
                f"{bad}:7: headers.Authorization: ${{MISSING_TOKEN}} is not set in the environment"
            ]
            bad.write_text(path.read_text().replace('cron = "0 3 * * *"', 'cron = "0 3 * *"')
                           .replace("every_seconds = 3600", "every_seconds = -1"))  # fmt: skip
            done = apply("--prune", file=bad)
            assert done.returncode == 1
            problems = error_lines(done.stderr)
            assert problems[0].startswith(f"{bad}:12: cron: ")
            assert problems[1].startswith(f"{bad}:20: every_seconds: ")
            assert problems[-1] == f"steeple: {bad} refused (2 problems); nothing changed"
            assert {k: s["version"] for k, s in stored().items()} == {
                k: s["version"] for k, s in before.items()
            }

            # prune: only the keyed schedule the file lost
            path.write_text(
                schedules_file(receiver, tick_name="Tick, renamed", team="dev", with_gone=False)
            )
            done = apply("--prune", "--dry-run")
            assert done.returncode == 0 and f"- gone ({before['gone']['id']})" in done.stdout
            assert "gone" in stored()
            done = apply("--prune")
            assert done.returncode == 0, done.stderr
            assert f"- gone ({before['gone']['id']})" in done.stdout
            assert sorted(stored()) == sorted(["tick", "nightly", unkeyed["id"]])

            # export, then apply: nothing to change, and no secret in the file
            exported = tmp_path / "exported.toml"
            done = steeple("export", "-o", str(exported), env=env)
            assert done.returncode == 0, done.stderr
            text = exported.read_text()
            assert "s3cret" not in text and 'Authorization = "<masked>"' in text
            assert f"# {unkeyed['id']} has no key" in text
            done = apply(file=exported)
            assert done.returncode == 0, done.stderr
            assert "nothing to change" in done.stdout
            done = apply("--prune", file=exported)
            assert "nothing to change" in done.stdout
            # from standard input; export --json is an apply's body
            piped = subprocess.run(
                [sys.executable, "-m", "appliance", "apply", "-f", "-", "--json"],
                input=text, capture_output=True, text=True, timeout=60, env={**os.environ, **env},
            )  # fmt: skip
            assert piped.returncode == 0, piped.stderr
            assert json.loads(piped.stdout)["changed"] is False
            done = steeple("export", "--json", env=env)
            body = json.loads(done.stdout)
            assert sorted(s["key"] for s in body["schedules"]) == ["nightly", "tick"]
            # A connection of its own: the test's one sat idle through the subprocesses above,
            # and a server closing an idle keep-alive connection as a POST goes out is a
            # disconnect httpx does not retry (seen once in CI).
            with app.client(tenant["api_key"]) as fresh:
                made = fresh.post("/v1/schedules/apply", json={**body, "prune": True})
            assert made.json()["changed"] is False
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
    # the cursor was kept across the change: every second once, none replayed or missed
    instants = sorted(seconds(receiver, tick["id"]))
    assert instants == list(range(instants[0], instants[-1] + 1, 1000))


def test_export_then_apply_is_a_no_op_over_generated_schedules(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A few generated sets, each applied over the API, exported by the CLI and applied
    back by the CLI: nothing to change, no version moved."""
    data = tmp_path / "data"
    tenant = create_tenant(data)
    app = Appliance(data).start()
    env = {"STEEPLE_URL": app.base_url, "STEEPLE_API_KEY": tenant["api_key"],
           "XDG_CONFIG_HOME": str(tmp_path / "config")}  # fmt: skip
    exported = tmp_path / "exported.toml"

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(schedule_documents(receiver.url))
    def round_trip(documents: list[dict[str, Any]]) -> None:
        with app.client(tenant["api_key"]) as api:
            made = api.post("/v1/schedules/apply", json={"schedules": documents, "prune": True})
            assert made.status_code == 200, made.text
            before = {s["id"]: s["version"] for s in iter_pages(api, "/v1/schedules")}
            done = steeple("export", "-o", str(exported), env=env)
            assert done.returncode == 0, done.stderr
            done = steeple("apply", "--prune", "-f", str(exported), env=env)
            assert done.returncode == 0, done.stderr
            assert "nothing to change" in done.stdout, exported.read_text()
            assert {s["id"]: s["version"] for s in iter_pages(api, "/v1/schedules")} == before

    try:
        round_trip()
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
