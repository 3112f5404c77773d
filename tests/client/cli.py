"""The ``steeple`` client commands as a user runs them: real subprocesses, environment
of their own (no STEEPLE_* from the test's, a config directory in ``tmp_path``)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

CLIENT_ENV = ("STEEPLE_URL", "STEEPLE_API_KEY", "STEEPLE_PROFILE", "XDG_CONFIG_HOME")


def environment(config_home: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV}
    return base | {"XDG_CONFIG_HOME": str(config_home)} | extra


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "appliance", *args]


def run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args), capture_output=True, text=True, timeout=60, env=env, input=stdin
    )


def ok_json(env: dict[str, str], *args: str) -> Any:
    done = run(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Lines:
    """A long-running command whose stdout lines a reader thread collects."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def next(self, timeout: float = 30) -> str:
        return self.lines.get(timeout=timeout)

    def next_json(self, timeout: float = 30) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.next(timeout))
        return document

    def stop(self, sig: int) -> tuple[int, str]:
        """Send ``sig``; the exit status and everything written to stderr."""
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()

    def close(self) -> None:
        """Kill the command if it still runs, and close its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
