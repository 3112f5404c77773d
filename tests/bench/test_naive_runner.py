"""The naive peer's own loop (bench.naive_runner), pass by pass with an injected ``now``,
against the real sink: each due occurrence delivered once with its own key, committed,
and a delivery that fails left due for the next pass."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.naive_runner import Poster, add_jobs, open_db, run_pass, scheduled_text
from bench.processes import Sink, sink

pytestmark = pytest.mark.slow

T = 1_800_000_000  # a whole epoch second, 2027-01-15T08:00:00Z


@pytest.fixture(scope="module")
def module_sink() -> Iterator[Sink]:
    with sink() as running:
        yield running


@pytest.fixture
def the_sink(module_sink: Sink) -> Sink:
    module_sink.reset()
    return module_sink


def due_column(path: Path) -> dict[str, int | None]:
    """``next_due`` per job, read through a fresh connection (what a restart would see)."""
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT id, next_due FROM jobs ORDER BY id").fetchall())
    finally:
        conn.close()


def test_each_due_second_is_delivered_once_with_its_own_key(tmp_path: Path, the_sink: Sink) -> None:
    path = tmp_path / "jobs.sqlite"
    conn = open_db(path)
    add_jobs(conn, jobs=3, first_due=T, period_s=1)
    poster = Poster(the_sink.url)
    try:
        assert run_pass(conn, poster, T - 0.5) == 0  # nothing due yet
        # Three seconds due at once (the poller fell behind): each pass sends every
        # job's oldest second, so the backlog is caught up second by second.
        assert [run_pass(conn, poster, T + 2.5) for _ in range(4)] == [3, 3, 3, 0]
    finally:
        poster.close()
        conn.close()
    arrivals = the_sink.records()
    expected = {f"j{i}@{scheduled_text(T + s)}" for i in range(3) for s in range(3)}
    assert sorted(a.key for a in arrivals) == sorted(expected)  # 9 arrivals, 9 keys
    assert {a.attempt for a in arrivals} == {1}
    assert all(a.key.endswith("@" + a.scheduled_for) for a in arrivals)
    assert scheduled_text(T) == "2027-01-15T08:00:00Z"
    assert due_column(path) == {"j0": T + 3, "j1": T + 3, "j2": T + 3}


def test_a_one_off_is_delivered_once_then_never_due(tmp_path: Path, the_sink: Sink) -> None:
    path = tmp_path / "jobs.sqlite"
    conn = open_db(path)
    add_jobs(conn, jobs=4, first_due=T, period_s=0)
    poster = Poster(the_sink.url)
    try:
        assert [run_pass(conn, poster, T + 0.01) for _ in range(2)] == [4, 0]
        assert run_pass(conn, poster, T + 3600) == 0
    finally:
        poster.close()
        conn.close()
    assert the_sink.count() == 4 and the_sink.distinct() == 4
    assert due_column(path) == dict.fromkeys(["j0", "j1", "j2", "j3"])


def test_a_failed_post_leaves_the_job_due_for_the_next_pass(tmp_path: Path, the_sink: Sink) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{probe.getsockname()[1]}/hook"
    path = tmp_path / "jobs.sqlite"
    conn = open_db(path)
    add_jobs(conn, jobs=2, first_due=T, period_s=1)
    refused, poster = Poster(closed_url, timeout=2), Poster(the_sink.url)
    try:
        assert run_pass(conn, refused, T + 0.5) == 0
        assert due_column(path) == {"j0": T, "j1": T}
        assert run_pass(conn, poster, T + 0.5, stopping=lambda: True) == 0  # stopped first
        assert run_pass(conn, poster, T + 0.5) == 2
    finally:
        refused.close()
        poster.close()
        conn.close()
    assert sorted(a.key for a in the_sink.records()) == [
        f"j0@{scheduled_text(T)}",
        f"j1@{scheduled_text(T)}",
    ]
    assert due_column(path) == {"j0": T + 1, "j1": T + 1}
