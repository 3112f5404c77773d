"""Every benchmark at a tiny size, so none of them can rot (issue 3). Counts and losses are
asserted; timings never are (benchmarks do not gate CI on a time)."""

from __future__ import annotations

import datetime
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import pytest
import trio

from appliance.core.timing import ScheduleKind, kind_of, occurrences
from appliance.store.usecases.plan_pass import PlannerConfig
from bench import burst, peers, planner, recovery, scale, steady, transport
from bench.deliveries import judge, parse_scheduled_for
from bench.processes import Arrival, Sink, sink
from bench.report import percentile, summarise

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def the_sink() -> Iterator[Sink]:
    with sink() as running:
        yield running


def test_judge_counts_losses_duplicates_and_strangers() -> None:
    expected = {"a": 1_000, "b": 2_000, "c": 3_000}
    arrivals = [
        Arrival(at_ns=1_500 * 10**6, key="a", attempt=1, scheduled_for=""),
        Arrival(at_ns=1_200 * 10**6, key="a", attempt=2, scheduled_for=""),
        Arrival(at_ns=2_100 * 10**6, key="b", attempt=1, scheduled_for=""),
        Arrival(at_ns=9_000 * 10**6, key="zzz", attempt=1, scheduled_for=""),
    ]
    verdict = judge(arrivals, expected)
    assert (verdict.delivered, verdict.lost, verdict.duplicates, verdict.unexpected) == (2, 1, 1, 1)
    assert sorted(verdict.lateness_ms(expected)) == pytest.approx([100.0, 200.0])
    assert parse_scheduled_for("1970-01-01T00:00:02Z") == 2_000


def test_transport_delivers_through_the_real_client(the_sink: Sink) -> None:
    the_sink.reset()
    figures = trio.run(transport.deliver, the_sink.url, 40, 4)
    assert the_sink.count() == 44  # the warm-up of 4, then 40
    assert figures["req_per_s"] > 0 and figures["cpu_ms_per_req"] >= 0


def test_percentile_and_summary() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50.0,
        99.0,
        100.0,
    )
    assert summarise([{"x": 1.0}, {"x": 5.0}, {"x": 2.0}]) == {
        "x": {"median": 2.0, "min": 1.0, "max": 5.0}
    }


def test_sink_records_keep_alive_requests(the_sink: Sink) -> None:
    import http.client

    the_sink.reset()
    conn = http.client.HTTPConnection("127.0.0.1", the_sink.port, timeout=10)
    for i in range(3):
        conn.request("POST", "/hook", body=b"{}", headers={
            "X-Idempotency-Key": f"k{i % 2}", "X-Attempt": "1",
            "X-Scheduled-For": "2026-11-29T00:00:00Z"})  # fmt: skip
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"")
    conn.close()
    records = the_sink.records()
    assert [r.key for r in records] == ["k0", "k1", "k0"]
    assert the_sink.count() == 3 and the_sink.distinct() == 2
    assert all(r.scheduled_for == "2026-11-29T00:00:00Z" and r.attempt == 1 for r in records)


def test_a_slow_sink_records_on_arrival_and_answers_after_its_delay() -> None:
    import http.client
    import time

    from bench.processes import sink

    with sink(answer_ms=300) as slow:
        conn = http.client.HTTPConnection("127.0.0.1", slow.port, timeout=10)
        sent = time.time_ns()
        conn.request("POST", "/hook", body=b"{}", headers={"X-Idempotency-Key": "k"})
        response = conn.getresponse()
        answered = time.time_ns()
        assert (response.status, response.read()) == (200, b"")
        conn.close()
        (record,) = slow.records()
    assert answered - sent >= 300_000_000  # the receiver's work, before its answer
    assert record.at_ns - sent < 300_000_000  # the arrival is what lateness counts


def test_burst_delivers_every_occurrence(tmp_path: Path, the_sink: Sink) -> None:
    figures = burst.burst_once(tmp_path, n=50, lead_s=12, timeout_s=60, the_sink=the_sink)
    assert (figures["delivered"], figures["lost"]) == (50, 0)
    assert figures["cpu_s"] > 0


def test_burst_counts_the_cpu_of_each_store_call(tmp_path: Path, the_sink: Sink) -> None:
    calls = tmp_path / "store-calls.json"
    figures = burst.burst_once(
        tmp_path, n=50, lead_s=12, timeout_s=60, store_calls_to=calls, the_sink=the_sink
    )
    assert (figures["delivered"], figures["lost"]) == (50, 0)
    assert figures["store completions.complete_runs calls"] == 50  # batched or alone
    assert figures["store claims.claim_runs calls"] >= 1
    assert figures["store completions.complete_runs ms/delivery"] > 0


def test_steady_delivers_the_window(tmp_path: Path, the_sink: Sink) -> None:
    figures = steady.steady_once(tmp_path, rate=20, duration_s=3, the_sink=the_sink)
    assert (figures["delivered"], figures["undelivered"]) == (60, 0)


def test_steady_spread_measures_lateness_from_the_jittered_due_at(
    tmp_path: Path, the_sink: Sink
) -> None:
    figures = steady.steady_once(tmp_path, rate=20, duration_s=3, the_sink=the_sink, spread=True)
    assert (figures["delivered"], figures["undelivered"]) == (60, 0)
    # Never before due_at: a lateness below 0 would be a delivery fired early (or the
    # bench computing due_at unlike the appliance).
    assert figures["lateness_min_ms"] >= 0


def test_planner_plans_a_minute(tmp_path: Path) -> None:
    runs = planner.planner_runs(tmp_path, n=1_000, runs=1)
    # 1,000 schedules over 40 (expression, zone) pairs: 25 per pair. Per planned minute
    # (61 s with the 2 s lookahead, 60 s of passes), the every-minute, every-15-seconds and
    # every-10-seconds pairs always fire; others depend on the wall clock. So at least
    # 25 * 5 * (1 + 4 + 6) occurrences.
    assert runs[0]["occurrences"] >= 25 * 5 * 11
    assert runs[0]["passes"] >= 60


@dataclass(frozen=True, slots=True, kw_only=True)
class _StoredTiming:
    """A schedule's timing columns as read back from the table (core.timing.Timing)."""

    cron: str
    timezone: str
    at: int | None
    every_seconds: int | None
    start_at: int | None
    end_at: int | None
    dst_gap: str | None = None
    dst_fold: str | None = None


def _cuts_the_minute(timing: _StoredTiming, start: int) -> bool:
    """Bounded by an end, or by a start after the minute began (an interval's anchor in
    the past is no bound that matters here)."""
    return timing.end_at is not None or (timing.start_at or 0) >= start


def test_planner_kinds_mix_plans_every_occurrence_once(tmp_path: Path) -> None:
    # A fixed minute (a Tuesday, 09:00 UTC: the weekday and hourly crons fire too).
    start = int(datetime.datetime(2026, 12, 1, 9, tzinfo=datetime.UTC).timestamp() * 1000)
    path = tmp_path / "kinds.db"
    planner.build_template(path, n=400, now=start - 1, mix="kinds")
    config = PlannerConfig()
    figures = planner.plan_minute(path, start_ms=start, config=config)
    # Expected independently of the bench and the planner: each stored timing's
    # occurrences from the minute's start up to the last pass's horizon.
    horizon = start + (planner.MINUTE_S - 1) * 1000 + config.lookahead_ms
    conn = apsw.Connection(str(path))
    expected: set[tuple[str, int]] = set()
    kinds: set[tuple[ScheduleKind, bool]] = set()
    for sid, *columns in conn.execute(
        "SELECT id, cron, timezone, at, every_seconds, start_at, end_at FROM schedules"
    ):
        timing = _StoredTiming(**dict(zip(_StoredTiming.__slots__, columns, strict=False)))
        for instant in occurrences(timing, after_ms=start - 1):
            if instant > horizon:
                break
            expected.add((sid, instant))
            kinds.add((kind_of(timing), _cuts_the_minute(timing, start)))
    planned = conn.execute(
        "SELECT schedule_id, scheduled_for, state FROM job_runs ORDER BY schedule_id"
    ).fetchall()
    conn.close()
    # Every kind, bounded or not, has occurrences in the minute (else the test proves little).
    assert kinds >= {(ScheduleKind.CRON, False), (ScheduleKind.CRON, True),
                     (ScheduleKind.EVERY, False), (ScheduleKind.EVERY, True),
                     (ScheduleKind.AT, False)}  # fmt: skip
    assert {(sid, at) for sid, at, _ in planned} == expected
    assert len(planned) == len(expected) == figures["occurrences"]  # each once
    assert {state for _, _, state in planned} == {"pending"}


def test_scale_serves_the_api(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    built = scale.build(data_dir, schedules=1_000, runs=10_000)
    assert built["run_rows"] == 10_000
    conn = apsw.Connection(str(scale.seed.db_path(data_dir)))
    failed = conn.execute("SELECT count(*) FROM job_runs WHERE state = 'failed'").fetchone()
    conn.close()
    assert failed == (10_000 // scale.FAILED_EVERY,)  # the dead-letter view has pages to read
    figures = scale.scale_once(data_dir, built, requests=10, seed_=1)
    assert figures["rss_mb"] > 0
    assert figures["get_run_p99_ms"] >= figures["get_run_p50_ms"]
    assert figures["list_failed_p99_ms"] >= figures["list_failed_p50_ms"]
    storage = scale.bytes_per_run(scale.seed.db_path(data_dir), 10_000)
    assert storage["db_file_bytes_per_run_row"] > 0


def test_recovery_delivers_everything_after_sigkill(tmp_path: Path, the_sink: Sink) -> None:
    figures = recovery.recovery_once(tmp_path, size=200, kill_after=20, timeout_s=60,
                                     the_sink=the_sink)  # fmt: skip
    assert figures["pending"] == 200
    assert figures["lost"] == 0
    # A first delivery after the restart exists unless the first process had delivered
    # everything before the SIGKILL landed (a loaded machine: 200 runs go in a blink).
    delivered_after_restart = figures["first_delivery_s"] == figures["first_delivery_s"]
    assert delivered_after_restart or figures["delivered_before_kill"] >= figures["pending"]


@pytest.mark.skipif(
    importlib.util.find_spec("apscheduler") is None
    or importlib.util.find_spec("sqlalchemy") is None,
    reason="the peer needs apscheduler>=3.11,<4 and sqlalchemy (the bench extra)",
)
def test_peer_runs_apscheduler(tmp_path: Path, the_sink: Sink) -> None:
    burst_figures = peers.peer_burst_once(tmp_path, n=20, lead_s=10, timeout_s=60,
                                          the_sink=the_sink)  # fmt: skip
    assert (burst_figures["delivered"], burst_figures["lost"]) == (20, 0)
    steady_figures = peers.peer_steady_once(tmp_path, rate=10, duration_s=2, the_sink=the_sink)
    assert (steady_figures["delivered"], steady_figures["undelivered"]) == (20, 0)


def test_peer_runs_the_naive_poller(tmp_path: Path, the_sink: Sink) -> None:
    burst_figures = peers.peer_burst_once(tmp_path, n=20, lead_s=2, timeout_s=60,
                                          the_sink=the_sink, kind="naive")  # fmt: skip
    assert (burst_figures["delivered"], burst_figures["lost"]) == (20, 0)
    assert burst_figures["duplicates"] == 0
    steady_figures = peers.peer_steady_once(tmp_path, rate=5, duration_s=3, the_sink=the_sink,
                                            kind="naive")  # fmt: skip
    assert (steady_figures["delivered"], steady_figures["undelivered"]) == (15, 0)
    assert steady_figures["duplicates"] == 0


def test_peer_ratios_put_steeple_over_each_arm() -> None:
    from bench import peer

    runs = {
        "steeple": [{"achieved_per_s": 500.0, "lateness_p99_ms": 50.0}],
        "naive": [{"achieved_per_s": 250.0, "lateness_p99_ms": 200.0}],
    }
    groups = peer.arm_groups("steady 500/s", runs, higher_better=["achieved_per_s"],
                             lower_better=["lateness_p99_ms"])  # fmt: skip
    assert list(groups) == ["steady 500/s: steeple", "steady 500/s: naive",
                            "steady 500/s: ratio vs naive"]  # fmt: skip
    assert groups["steady 500/s: ratio vs naive"] == [
        {"achieved_per_s_ratio": 2.0, "lateness_p99_ms_ratio": 4.0}
    ]
    assert peer.parse_peers("naive,apscheduler,naive") == ["naive", "apscheduler"]
    with pytest.raises(SystemExit, match="unknown cron"):
        peer.parse_peers("naive,cron")
