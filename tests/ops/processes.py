"""``steeple serve`` as a subprocess with any flags, its log read line by line, for the
start-up and shutdown tests (the e2e harness's appliance always allows loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path


class Served:
    def __init__(
        self, *args: str, env: dict[str, str] | None = None, argv: list[str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            argv or [sys.executable, "-m", "appliance", "serve", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def command(cls, argv: list[str], env: dict[str, str] | None = None) -> Served:
        """Any command line (a launcher that execs the appliance, an installed binary)."""
        return cls(env=env, argv=argv)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait_for_line(self, text: str, timeout: float = 30) -> str:
        """The first log line containing ``text``; polls the collected lines until a
        deadline (the process writes them, nothing to wait on in between)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no log line with {text!r}:\n{''.join(self.lines)}")

    def wait(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait()


def data_args(data_dir: Path, listen: str = "127.0.0.1:0") -> list[str]:
    return ["--data-dir", str(data_dir), "--listen", listen]


def wait_for_log(lines: list[str], text: str, timeout: float = 30) -> str:
    """The first line of ``lines`` (a log a reader thread appends to) containing ``text``;
    polls until a deadline (nothing to wait on between the process's writes)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in list(lines):
            if text in line:
                return line
        assert time.monotonic() < deadline, f"no log line with {text!r}:\n{''.join(lines)}"
        time.sleep(0.05)
