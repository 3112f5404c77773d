"""Start-up and shutdown as an operator meets them: one line per start-up error, a second
signal that stops at once, and the boot audit of refused destinations."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import Appliance, Receiver, create_tenant
from tests.ops.processes import Served, data_args, wait_for_log

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.release()
    r.close()


def test_a_port_in_use_is_one_line_with_the_fix(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = Served(*data_args(tmp_path, f"127.0.0.1:{port}"))
        assert served.wait() == 1
    text = "".join(served.lines)
    assert "Traceback" not in text and "ExceptionGroup" not in text
    assert served.lines[-1] == (
        f"steeple: error: listen: cannot listen on 127.0.0.1:{port}: another program is"
        " listening there (another Steeple?); choose another with --listen HOST:PORT\n"
    )
    assert served.lines[0].startswith(("20", "steeple"))  # the log said which database
    assert any(f"database {tmp_path / 'steeple.db'}" in line for line in served.lines)


def test_an_unusable_data_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    served = Served(*data_args(blocker / "data"))
    assert served.wait() == 1
    assert served.lines[-1].startswith(f"steeple: error: cannot use the data directory {blocker}")
    assert "Traceback" not in "".join(served.lines)


def test_a_second_signal_during_the_drain_stops_at_once(tmp_path: Path, receiver: Receiver) -> None:
    receiver.hold = lambda _d: True  # the delivery stays in flight
    tenant = create_tenant(tmp_path)
    app = Appliance(tmp_path, env={"STEEPLE_SHUTDOWN_GRACE_SECONDS": "120"}).start()
    try:
        with app.client(tenant["api_key"]) as api:
            made = api.post(
                "/v1/schedules",
                json={"name": "t", "cron": "* * * * * *", "target_url": receiver.url, "payload": 1},
            )
            assert made.status_code == 201, made.text
        receiver.wait_for(lambda ds: len(ds) >= 1)
        assert app.proc is not None
        app.proc.send_signal(signal.SIGINT)
        wait_for_log(app.log, "stopping: no new claims")
        started = time.monotonic()
        app.proc.send_signal(signal.SIGINT)
        assert app.proc.wait(20) == 0, "".join(app.log)  # not the 120 s grace
        assert time.monotonic() - started < 20
    finally:
        app.kill()
    assert any("received SIGINT again: stopping now" in line for line in app.log)


def test_boot_says_how_many_active_schedules_the_policy_refuses(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The walkthrough's trap: allowed once with --allow-target, restarted without."""
    tenant = create_tenant(tmp_path)
    app = Appliance(tmp_path).start()
    try:
        with app.client(tenant["api_key"]) as api:
            for n in range(2):
                made = api.post(
                    "/v1/schedules",
                    json={
                        "name": f"s{n}",
                        "cron": "0 0 1 1 *",
                        "target_url": receiver.url,
                        "payload": 1,
                    },
                )
                assert made.status_code == 201, made.text
    finally:
        assert app.kill(signal.SIGTERM) == 0
    assert not any("policy refuses" in line for line in app.log)

    plain = Served(*data_args(tmp_path))
    try:
        line = plain.wait_for_line("policy refuses")
    finally:
        plain.proc.send_signal(signal.SIGTERM)
        plain.wait()
    assert "WARNING" in line and "2 active schedules" in line and receiver.url in line
    assert "allow_targets" in line
