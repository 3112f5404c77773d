"""The newcomer's script: the README top to bottom, as written. A copy of this checkout is
the clone; every command of its ``sh`` blocks runs verbatim in bash, from the clone, in
order — the quick start's fresh virtualenv and ``pip install .`` included — against the
``serve`` those commands start. A command that fails fails the test.

What the test does that a reader does by hand, each listed below:

- ``substitutions``: the appliance's and the receiver's ports are free ones (a real
  appliance or receiver may hold 8080 and 9000), and ``curl -s`` fails on an error answer
  (``--fail-with-body``: a reader sees the problem JSON; a script needs the exit status);
- ``PLACEHOLDERS`` (tests/e2e/readme.py): ``stk_…``, ``sch_…`` and ``run_…`` are filled
  from what the earlier command printed, as the README tells the reader to;
- ``SKIPPED``: commands that are not the walkthrough's;
- long-running commands (``serve``, the receiver, the event stream) run in the
  background, each in "its own terminal"; a second ``serve`` first stops the running one
  with Ctrl-C (SIGINT), as step 1 says;
- ``promises``: what the README says a command shows, checked on its output; and before
  the bulk replay, a wait until a run succeeded in a past second (``as_of`` is ``date``'s
  whole second; a reader is slower than a script).

The environment is a reader's with a home of its own: ``HOME`` and ``STEEPLE_DATA_DIR``
point into the test's temporary directory, so no real data directory is touched, and
``STEEPLE_LISTEN`` is the free port (the quick start's ``serve`` names no address).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from appliance.core.instants import parse_instant
from tests.e2e.readme import PLACEHOLDERS, README, commands, placeholders_in, sh_blocks

pytestmark = pytest.mark.slow

ROOT = README.parent
SKIPPED = {
    # The whole gate: CI runs it (and it runs this test); not a step of the walkthrough.
    "scripts/test": "the test suite itself",
}
INSTALL_TIMEOUT_S = 600  # the quick start's fresh virtualenv and pip install
COMMAND_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def substitutions(api_port: int, receiver_port: int) -> list[tuple[str, str]]:
    return [
        ("127.0.0.1:8080", f"127.0.0.1:{api_port}"),
        ('("127.0.0.1", 9000)', f'("127.0.0.1", {receiver_port})'),
        ("127.0.0.1:9000", f"127.0.0.1:{receiver_port}"),
        ("curl -s", "curl --fail-with-body -s"),
    ]


@dataclass
class Background:
    """A command left running in a terminal of its own; its output goes to ``log``."""

    command: str
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, found: Callable[[str], bool], what: str, timeout: float) -> str:
        """Poll the log until ``found`` holds (the process writes it; nothing to wait on)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found(text := self.output()):
                return text
            assert self.proc.poll() is None, f"{self.command!r} ended:\n{text}"
            time.sleep(0.1)
        raise AssertionError(f"{what} within {timeout} s from {self.command!r}:\n{self.output()}")

    def interrupt(self) -> int:
        """Ctrl-C, as a reader ends it: the terminal signals its whole process group (the
        quick start's ``… && steeple serve`` is bash waiting on the appliance)."""
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


@dataclass
class Reader:
    """A newcomer's shell: the clone as working directory, what ``export`` set, the
    terminals left running and everything each command printed."""

    clone: Path
    env: dict[str, str]
    ports: tuple[int, int]  # the appliance's, the receiver's
    logs: Path
    filled: dict[str, str] = field(default_factory=dict)
    printed: list[tuple[str, str]] = field(default_factory=list)  # (README command, output)
    serve: Background | None = None
    others: list[Background] = field(default_factory=list)

    def prepare(self, command: str) -> str:
        for text, value in [*self.filled.items(), *substitutions(*self.ports)]:
            command = command.replace(text, value)
        unfilled = placeholders_in(command)
        assert not unfilled, f"no value for {unfilled} in {command!r}"
        return command

    def run(self, written: str) -> str:
        command = self.prepare(written)
        env_file = self.logs / "env"
        script = f"set -eo pipefail\n{command}\nenv -0 > {env_file}\n"
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=self.clone,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, (
            f"README command failed ({done.returncode}): {written}\n{output}"
        )
        entries = env_file.read_text(encoding="utf-8").split("\0")
        self.env = dict(entry.split("=", 1) for entry in entries if "=" in entry)
        self.remember(written, output)
        return output

    def start(self, written: str) -> Background:
        command = self.prepare(written)
        log = self.logs / f"terminal-{len(list(self.logs.glob('terminal-*')))}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=self.clone,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal of its own: its own process group
            )
        return Background(written, proc, log)

    def remember(self, written: str, output: str) -> None:
        self.printed.append((written, output))
        for placeholder in PLACEHOLDERS:
            if placeholder.source in written and placeholder.text not in self.filled:
                found = re.search(placeholder.pattern, output)
                assert found, f"{written!r} printed no {placeholder.text}:\n{output}"
                self.filled[placeholder.text] = found.group(1)

    def close(self) -> None:
        for terminal in [*self.others, *([self.serve] if self.serve else [])]:
            terminal.kill()


def served(terminal: Background, port: int) -> None:
    timeout = INSTALL_TIMEOUT_S if "pip install" in terminal.command else COMMAND_TIMEOUT_S
    terminal.wait_for(lambda log: f"127.0.0.1:{port}" in log, "no 'listening on'", timeout)


def listening(port: int) -> Callable[[str], bool]:
    def accepts(_: str) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    return accepts


def long_running(reader: Reader, written: str) -> bool:
    """Start ``written`` in a terminal of its own if it runs until stopped; False if it
    is an ordinary command."""
    api_port, receiver_port = reader.ports
    if "steeple serve" in written:
        if reader.serve is not None:  # step 1: Ctrl-C the running one, start it again
            assert reader.serve.interrupt() == 0, reader.serve.output()
        reader.serve = reader.start(written)
        served(reader.serve, api_port)
        return True
    if written.startswith("python3 -c") and "serve_forever" in written:
        receiver = reader.start(written)
        receiver.wait_for(listening(receiver_port), "no receiver", COMMAND_TIMEOUT_S)
        reader.others.append(receiver)
        return True
    if written.startswith("curl -sN"):  # the live stream: read an event, then Ctrl-C
        stream = reader.start(written)
        reader.others.append(stream)
        text = stream.wait_for(lambda log: "\ndata:" in "\n" + log, "no event", 30)
        stream.interrupt()
        reader.remember(written, text)
        return True
    return False


def receiver_printed(reader: Reader) -> str:
    """Step 4: "Within ten seconds the receiver prints a line per delivery"."""
    (receiver,) = [t for t in reader.others if "serve_forever" in t.command]
    return receiver.wait_for(lambda log: '"hello"' in log, "no delivery", 30)


def succeeded_before_this_second(reader: Reader) -> None:
    """Before the bulk replay: its ``as_of`` is ``date``'s whole second, and a reader takes
    longer than a second between commands, so the runs that succeeded are in a past
    second. A script is quicker: it waits until one is (polling the API)."""
    api_port, _ = reader.ports
    query = urllib.parse.urlencode({"schedule_id": reader.filled["sch_…"], "state": "succeeded"})
    request = urllib.request.Request(
        f"http://127.0.0.1:{api_port}/v1/runs?{query}",
        headers={"Authorization": f"Bearer {reader.filled['stk_…']}"},
    )
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while time.monotonic() < deadline:
        with urllib.request.urlopen(request, timeout=10) as answer:
            runs = json.load(answer)["items"]
        second_ms = int(time.time()) * 1000  # what `date -u +%S` prints, in ms
        if any(parse_instant(run["updated_at"]) < second_ms for run in runs):
            return
        time.sleep(0.1)
    raise AssertionError(f"no run of the schedule succeeded in a past second: {runs}")


def promises(reader: Reader, written: str, output: str) -> None:
    """What the README says the command shows."""
    if "steeple init" in written:  # the quick start's serve is still running
        assert "restart it" in output, output
    if "8080/v1/schedules \\" in written:
        receiver_printed(reader)
    if "/v1/cron/preview" in written:
        assert "2027-03-14T07:00:00Z" in output and "2027-03-16T06:30:00Z" in output, output
    if "/v1/runs/replay" in written:
        answer = json.loads(output)
        assert answer["matched"] >= 1 and answer["replayed"] == answer["matched"], answer
    if "steeple user create" in written:
        assert "/setup/" in output, output


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """This checkout as a fresh clone has it: tracked and new files, no .venv, no build."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    target = tmp_path / "clone"
    for name in filter(None, listed.split("\0")):
        source, copy = ROOT / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)
    return target


@pytest.fixture
def reader(clone: Path, tmp_path: Path) -> Iterator[Reader]:
    home, logs = tmp_path / "home", tmp_path / "logs"
    home.mkdir()
    logs.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("STEEPLE_", "PYTHON", "VIRTUAL_ENV", "PYTEST", "COV_"))
    }
    env |= {"HOME": str(home), "STEEPLE_DATA_DIR": str(tmp_path / "data")}
    ports = free_port(), free_port()
    env["STEEPLE_LISTEN"] = f"127.0.0.1:{ports[0]}"  # the quick start's serve names none
    r = Reader(clone, env, ports, logs)
    try:
        yield r
    finally:
        r.close()


def test_the_readme_walkthrough_runs_as_written(reader: Reader) -> None:
    ran = []
    for block in sh_blocks(README.read_text(encoding="utf-8")):
        for written in commands(block):
            if written in SKIPPED:
                continue
            if "/v1/runs/replay" in written:
                succeeded_before_this_second(reader)
            if not long_running(reader, written):
                promises(reader, written, reader.run(written))
            ran.append(written)
    assert reader.serve is not None
    assert reader.serve.interrupt() == 0, reader.serve.output()  # a clean stop
    assert len(ran) >= 15, ran  # the quick start and every step of the walkthrough
