"""The naive peer: the scheduler a user writes by hand — a SQLite table of due jobs polled
every 100 ms, one synchronous POST at a time (cron + curl, made durable). Standard library
only: ``sqlite3`` and ``http.client``.

``python -m bench.naive_runner --db FILE --url URL --jobs N (--at EPOCH_S | --every-second)
[--targets FILE]`` writes N rows ``jobs(id, next_due, period_s, url)`` in one transaction
(``j<i>``, due at ``--at`` once, or every second from the next whole second; ``url`` line
``i`` of ``--targets``, else ``--url``), prints ``ready``, then loops until SIGTERM:

- every 100 ms (the next tick at once when a pass overran), ``SELECT`` the rows with
  ``next_due <= now``, oldest first;
- for each, one at a time: POST to its URL over one keep-alive connection per origin (on
  an error: close it, reconnect, try once more), then ``UPDATE`` its ``next_due`` (+ ``period_s``,
  so a late job catches up on every missed second as APScheduler with
  ``misfire_grace_time=None, coalesce=False`` does; ``NULL`` for a one-off) and commit —
  one commit per delivery. A POST that fails twice or answers ≥ 300 leaves the row due:
  the next pass tries again (at least once, like the other arms).

The database is in WAL mode with ``synchronous=FULL`` (as Steeple's): a delivery whose
commit returned is not sent again after a crash. Each POST carries the headers the sink
records, as :mod:`bench.apscheduler_runner` sends them: ``X-Idempotency-Key`` =
``<job id>@<scheduled_for>``, ``X-Attempt: 1``, ``X-Scheduled-For`` = the second the
occurrence was due (``2026-11-29T20:00:00Z``).
"""

from __future__ import annotations

import argparse
import http.client
import signal
import sqlite3
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.1
_BODY = b'{"bench":true}'


def scheduled_text(epoch_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def open_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)  # explicit BEGIN/COMMIT below
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS jobs "
        "(id TEXT PRIMARY KEY, next_due INTEGER, period_s INTEGER NOT NULL, url TEXT)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS jobs_due ON jobs (next_due)")
    return conn


def add_jobs(
    conn: sqlite3.Connection,
    *,
    jobs: int,
    first_due: int,
    period_s: int,
    urls: list[str] | None = None,
) -> None:
    """``jobs`` rows ``j0``… first due at ``first_due`` (epoch s), then every ``period_s``
    (0: once); job ``i`` posts to ``urls[i]`` when given (else the poster's URL). One
    transaction: setup, not measured."""
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO jobs (id, next_due, period_s, url) VALUES (?, ?, ?, ?)",
        ((f"j{i}", first_due, period_s, urls[i] if urls else None) for i in range(jobs)),
    )
    conn.execute("COMMIT")


Origin = tuple[str, int]


def _split(url: str) -> tuple[Origin, str]:
    parts = urllib.parse.urlsplit(url)
    return (parts.hostname or "127.0.0.1", parts.port or 80), parts.path or "/"


class Poster:
    """One keep-alive HTTP/1.1 connection per origin (the URL's by default); a fresh one
    after any error."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.origin, self.path = _split(url)
        self.timeout = timeout
        self.conns: dict[Origin, http.client.HTTPConnection] = {}

    def _once(self, origin: Origin, path: str, headers: dict[str, str]) -> int:
        conn = self.conns.get(origin)
        if conn is None:
            conn = self.conns[origin] = http.client.HTTPConnection(*origin, timeout=self.timeout)
        conn.request("POST", path, body=_BODY, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status

    def post(self, job: str, due_s: int, url: str | None = None) -> bool:
        """POST one occurrence (to ``url``, else the poster's); True when answered 2xx."""
        origin, path = _split(url) if url else (self.origin, self.path)
        text = scheduled_text(due_s)
        headers = {
            "X-Idempotency-Key": f"{job}@{text}",
            "X-Attempt": "1",
            "X-Scheduled-For": text,
            "Content-Type": "application/json",
        }
        for _ in range(2):
            try:
                return 200 <= self._once(origin, path, headers) < 300
            except (OSError, http.client.HTTPException):
                conn = self.conns.pop(origin, None)
                if conn is not None:
                    conn.close()
        return False

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns = {}


def run_pass(
    conn: sqlite3.Connection,
    poster: Poster,
    now_s: float,
    stopping: Callable[[], bool] = lambda: False,
) -> int:
    """One poll: deliver every row due at ``now_s``, one at a time, one commit each;
    the number delivered."""
    due = conn.execute(
        "SELECT id, next_due, period_s, url FROM jobs WHERE next_due <= ? ORDER BY next_due, id",
        (now_s,),
    ).fetchall()
    delivered = 0
    for job, due_s, period_s, url in due:
        if stopping():
            break
        if not poster.post(job, due_s, url):
            continue  # still due: the next pass tries again
        conn.execute("BEGIN")
        conn.execute(
            "UPDATE jobs SET next_due = ? WHERE id = ?",
            (due_s + period_s if period_s else None, job),
        )
        conn.execute("COMMIT")
        delivered += 1
    return delivered


def serve(conn: sqlite3.Connection, poster: Poster, stopping: Callable[[], bool]) -> None:
    """Poll every :data:`POLL_S` until ``stopping()``."""
    tick = time.monotonic()
    while not stopping():
        run_pass(conn, poster, time.time(), stopping)
        tick = max(tick + POLL_S, time.monotonic())
        time.sleep(max(0.0, tick - time.monotonic()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, type=Path)
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--at", type=float, help="burst: the epoch second every job fires")
    parser.add_argument("--every-second", action="store_true", help="steady: every second")
    parser.add_argument("--targets", type=Path, help="job i posts to line i (else --url)")
    args = parser.parse_args()
    if args.every_second == (args.at is not None):
        parser.error("give exactly one of --at and --every-second")
    stop: list[bool] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.append(True))
    conn = open_db(args.db)
    urls = args.targets.read_text().split() if args.targets else None
    if args.every_second:
        add_jobs(conn, jobs=args.jobs, first_due=int(time.time()) + 1, period_s=1, urls=urls)
    else:
        add_jobs(conn, jobs=args.jobs, first_due=int(args.at), period_s=0, urls=urls)
    poster = Poster(args.url)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        serve(conn, poster, lambda: bool(stop))
    finally:
        poster.close()
        conn.close()


if __name__ == "__main__":
    main()
