"""``steeple events --follow`` across an appliance restart: the appliance ends every
stream when it shuts down (docs: "so is every client when the appliance shuts down");
the client reconnects with ``Last-Event-ID`` and shows what happened while it was away
exactly once, then live events."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from tests.client.cli import Lines, environment, ok_json, run
from tests.e2e.harness import Appliance, create_tenant

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_follow_resumes_after_a_restart_with_nothing_lost_or_repeated(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    tenant = create_tenant(data_dir)
    listen = ("--listen", f"127.0.0.1:{free_port()}")  # the same address after the restart
    app = Appliance(data_dir, *listen).start()
    env = environment(tmp_path, STEEPLE_URL=app.base_url, STEEPLE_API_KEY=tenant["api_key"])
    schedule = ["--target-url", "http://127.0.0.1:9/", "--payload", "{}", "--every", "1h"]
    follow = Lines(env, "events", "--follow", "--json")
    try:
        first = ok_json(env, "schedules", "create", "--name", "before", *schedule)
        seen = [follow.next_json()]
        assert (seen[0]["type"], seen[0]["schedule_id"]) == ("schedule.created", first["id"])
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)

        # While the appliance is down, the operator issues a key: an event the stream
        # has not sent, written to the database the restarted appliance serves.
        made = run(env, "key", "create", "--tenant", tenant["tenant_id"], "--scope", "read",
                   "--data-dir", str(data_dir))  # fmt: skip
        assert made.returncode == 0, made.stderr
        app = Appliance(data_dir, *listen).start()
        later = ok_json(env, "schedules", "create", "--name", "after", *schedule)
        while not (
            seen[-1]["type"] == "schedule.created" and seen[-1]["schedule_id"] == later["id"]
        ):
            seen.append(follow.next_json())
        code, err = follow.stop(signal.SIGINT)
    finally:
        follow.close()
        app.kill(signal.SIGTERM)
    types = [e["type"] for e in seen]
    assert types.count("api_key.created") == 1  # sent after the reconnect: not lost
    assert types.count("appliance.restarted") == 1
    assert types.count("schedule.created") == 2
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(set(seqs)), "an event was repeated or out of order"
    assert code == 0
    assert "reconnecting" in err  # said on stderr, never in the NDJSON
