"""The processes a benchmark drives: the sink, the appliance, and what /proc says about them.

Every process is started by a context manager that kills it on exit (SIGTERM, then
SIGKILL after a grace period), so a failing benchmark leaves nothing running. Everything
listens on and talks to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK")
_LISTENING = re.compile(r"listening on (\S+)")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads), from /proc/<pid>/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)


def family_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, of its children that ended (``cutime``/``cstime``,
    once reaped) and of its living children: a server that forks a process per connection
    (PostgreSQL's postmaster) counted whole, from /proc."""
    total = _own_and_reaped(pid)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or entry.name == str(pid):
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile (its CPU moves to the parent's cutime when reaped)
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:  # ppid (field 4)
            total += _own_and_reaped(int(entry.name), fields)
    return total


def child_pids(pid: int) -> list[int]:
    """The living children of a process (their ppid is ``pid``), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        if int(text[text.rindex(")") + 2 :].split()[1]) == pid:  # ppid (field 4)
            found.append(int(entry.name))
    return found


def _own_and_reaped(pid: int, fields: list[str] | None = None) -> float:
    if fields is None:
        text = Path(f"/proc/{pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
    return sum(int(f) for f in fields[11:15]) / _TICKS  # utime, stime, cutime, cstime


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (threads of one name summed), from /proc/<pid>/task."""
    result: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            text = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        result[name] = result.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _TICKS
    return result


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _stop(proc: subprocess.Popen[Any], grace: float = 15.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)


# --- the sink ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    at_ns: int
    key: str
    attempt: int
    scheduled_for: str


class Sink:
    """A running ``bench.sink`` process."""

    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}/hook"

    def _get(self, path: str) -> bytes:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", path)
            return conn.getresponse().read()
        finally:
            conn.close()

    def count(self) -> int:
        return int(json.loads(self._get("/_count"))["count"])

    def distinct(self) -> int:
        return int(json.loads(self._get("/_count"))["distinct"])

    def wait_distinct(self, target: int, *, timeout: float, poll: float = 0.05) -> int:
        """Poll until the sink has seen ``target`` distinct keys or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        seen = self.distinct()
        while seen < target and time.monotonic() < deadline:
            time.sleep(poll)
            seen = self.distinct()
        return seen

    def records(self) -> list[Arrival]:
        return [
            Arrival(
                at_ns=row["t"], key=row["key"], attempt=int(row["attempt"] or 0),
                scheduled_for=row["sf"],
            )
            for row in map(json.loads, self._get("/_records").splitlines())
        ]  # fmt: skip

    def reset(self) -> None:
        self._get("/_reset")

    def wait_count(self, target: int, *, timeout: float, poll: float = 0.05) -> int:
        """Poll until the sink holds ``target`` records or ``timeout`` passes; the count."""
        deadline = time.monotonic() + timeout
        count = self.count()
        while count < target and time.monotonic() < deadline:
            time.sleep(poll)
            count = self.count()
        return count


@contextmanager
def sink(*, answer_ms: int = 0, hosts: int = 0) -> Iterator[Sink]:
    """The sink process (``hosts``: also listening on 127.0.0.2 … at the same port)."""
    argv = ["--port", "0", "--answer-ms", str(answer_ms), "--hosts", str(hosts)]
    proc = subprocess.Popen([sys.executable, "-m", "bench.sink", *argv],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"the sink did not start: {line!r}")
        yield Sink(proc, int(line.split()[1]))
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


# --- the appliance ----------------------------------------------------------------------


class Appliance:
    """``python -m appliance serve`` on a free loopback port, data in ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.env = env or {}
        self.prefix = prefix  # e.g. a profiler: ["-m", "pyinstrument", ..., "-m"]
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.log: list[str] = []
        self.started_at = 0.0  # time.time() just before the process was spawned

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60) -> Appliance:
        module = [*self.prefix, "appliance"] if self.prefix else ["-m", "appliance"]
        argv = [sys.executable, *module, "serve", "--data-dir", str(self.data_dir)]
        argv += ["--listen", "127.0.0.1:0", "--allow-target", "127.0.0.0/8"]
        self.log = []
        self.base_url = ""
        self.started_at = time.time()
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **self.env},
        )
        ready = threading.Event()
        self._reader = threading.Thread(target=self._read_log, args=(ready,), daemon=True)
        self._reader.start()
        if not ready.wait(timeout) or not self.base_url:
            self.stop(signal.SIGKILL)
            raise RuntimeError("the appliance did not start:\n" + "".join(self.log[-30:]))
        return self

    def _read_log(self, ready: threading.Event) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            match = _LISTENING.search(line)
            if match and not self.base_url:
                url = match.group(1).replace("0.0.0.0", "127.0.0.1")
                self.base_url = url if url.startswith("http") else "http://" + url
                ready.set()
        ready.set()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
        self._reader.join(timeout)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None


@contextmanager
def appliance(data_dir: Path, **kw: Any) -> Iterator[Appliance]:
    app = Appliance(data_dir, **kw)
    try:
        yield app.start()
    finally:
        app.stop()
