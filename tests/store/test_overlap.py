"""The overlap gate (docs/schedules.md, "Overlap") over the real planner and claim:
``skip`` records every occurrence due while an earlier run is open as a ``missed`` row
with reason ``overlap`` and its event, ``buffer_one`` lets one wait — and, a Hypothesis
property, ``skip`` never has two runs of a schedule running at once and records every
skip."""

from __future__ import annotations

from collections.abc import Callable

import apsw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.core.events import EventType
from appliance.core.overlap import HOLD_MS
from appliance.core.runs import AttemptOutcome, Transition
from appliance.store.claims import ClaimedRun, claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.events import list_events
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.tenants import create_tenant
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from tests.store.conftest import T0, ScheduleRow, insert_schedule

SECOND = 1000
OK = Completion(
    outcome=AttemptOutcome.OK,
    transition=Transition.SUCCEED,
    due_at=None,
    failure_reason=None,
    http_status=200,
    error=None,
    latency_ms=5,
    response_excerpt="ok",
)


def retry_at(due_at: int) -> Completion:
    return Completion(
        outcome=AttemptOutcome.RETRYABLE,
        transition=Transition.RETRY,
        due_at=due_at,
        failure_reason=None,
        http_status=503,
        error="HTTP 503",
        latency_ms=5,
        response_excerpt="busy",
    )


def states(db: Database, sid: str) -> list[tuple[int, str, str | None]]:
    def query(conn: apsw.Connection) -> list[tuple[int, str, str | None]]:
        return [
            ((int(s) - T0) // SECOND, str(state), reason)
            for s, state, reason in conn.execute(
                "SELECT scheduled_for, state, failure_reason FROM job_runs"
                " WHERE schedule_id = ? ORDER BY scheduled_for",
                (sid,),
            )
        ]

    return db.read_now(query)


def overlap_events(db: Database, tenant: str) -> list[str]:
    events = db.read_now(
        list_events, tenant_id=tenant, limit=10_000, types=frozenset({EventType.RUN_MISSED})
    )
    return [str(e.data["scheduled_for"]) for e in events if e.data.get("reason") == "overlap"]


class Harness:
    """The planner and one executor on one database, driven by hand at chosen instants."""

    def __init__(self, db: Database, tenant: str, *, overlap: str, every_s: int = 10) -> None:
        self.db = db
        row = ScheduleRow(
            cron="", every_seconds=every_s, start_at=T0, next_fire_at=T0, overlap=overlap
        )
        self.sid = db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)
        self.owner = db.write_now(register_incarnation, pid=1, now=T0)

    def step(self, now: int) -> list[ClaimedRun]:
        """Plan, then claim everything claimable, at ``now``."""
        self.db.write_now(plan_once, now=now, config=PlannerConfig())
        batch = self.db.write_now(
            claim_runs, owner=self.owner, now=now, lease_ms=600 * SECOND, limit=10
        )
        return list(batch.runs)

    def finish(self, run: ClaimedRun, now: int, completion: Completion = OK) -> None:
        assert self.db.write_now(complete_run, run=run, completion=completion, now=now)


def test_skip_records_each_occurrence_due_while_a_run_is_open(db: Database, tenant: str) -> None:
    h = Harness(db, tenant, overlap="skip")
    (first,) = h.step(T0)
    assert h.step(T0 + 10 * SECOND) == []  # due while the first still runs
    assert h.step(T0 + 20 * SECOND) == []
    h.finish(first, T0 + 25 * SECOND, retry_at(T0 + 45 * SECOND))
    assert h.step(T0 + 30 * SECOND) == []  # retrying counts as open
    (again,) = h.step(T0 + 45 * SECOND)
    assert again.run_id == first.run_id  # the retry; 40 s was skipped
    h.finish(again, T0 + 46 * SECOND)
    (later,) = h.step(T0 + 50 * SECOND)
    assert later.scheduled_for == T0 + 50 * SECOND
    assert states(db, h.sid)[:6] == [
        (0, "succeeded", None),
        (10, "missed", "overlap"),
        (20, "missed", "overlap"),
        (30, "missed", "overlap"),
        (40, "missed", "overlap"),
        (50, "running", None),
    ]
    assert overlap_events(db, tenant) == [
        "2026-08-06T03:00:10Z",
        "2026-08-06T03:00:20Z",
        "2026-08-06T03:00:30Z",
        "2026-08-06T03:00:40Z",
    ]


def test_skip_after_downtime_delivers_one_and_skips_the_rest(db: Database, tenant: str) -> None:
    h = Harness(db, tenant, overlap="skip")
    claimed = h.step(T0 + 35 * SECOND)  # 0..30 s all due at once (catch-up `all`)
    assert [run.scheduled_for for run in claimed] == [T0]
    assert [s[1] for s in states(db, h.sid)] == ["running", "missed", "missed", "missed"]


def test_buffer_one_lets_one_wait_and_skips_the_rest(db: Database, tenant: str) -> None:
    h = Harness(db, tenant, overlap="buffer_one")
    (first,) = h.step(T0)
    assert h.step(T0 + 10 * SECOND) == []  # 10 s waits
    assert h.step(T0 + 20 * SECOND) == []  # 20 s is skipped: one is already waiting
    h.finish(first, T0 + 21 * SECOND)
    (waiting,) = h.step(T0 + 21 * SECOND + HOLD_MS)
    assert waiting.scheduled_for == T0 + 10 * SECOND  # started within HOLD_MS of the finish
    assert states(db, h.sid)[:3] == [
        (0, "succeeded", None),
        (10, "running", None),
        (20, "missed", "overlap"),
    ]
    assert overlap_events(db, tenant) == ["2026-08-06T03:00:20Z"]


def test_allow_delivers_overlapping_occurrences(db: Database, tenant: str) -> None:
    h = Harness(db, tenant, overlap="allow")
    h.step(T0)
    assert len(h.step(T0 + 10 * SECOND)) == 1  # runs beside the first: today's behaviour


Action = tuple[str, int]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions=st.lists(
        st.tuples(st.sampled_from(["tick", "succeed", "retry"]), st.integers(1, 40)),
        min_size=1,
        max_size=25,
    ),
    every_s=st.sampled_from([1, 5, 10]),
)
def test_skip_never_runs_two_at_once_and_records_every_skip(
    actions: list[Action], every_s: int, tmp_path_factory: Callable[..., object]
) -> None:
    path = tmp_path_factory.mktemp("overlap") / "steeple.db"  # type: ignore[attr-defined]
    db = Database.open(path, threaded=False)
    tenant = db.write_now(create_tenant, name="t", now=T0).tenant_id
    h = Harness(db, tenant, overlap="skip", every_s=every_s)
    now, running = T0, list(h.step(T0))
    for action, seconds in actions:
        now += seconds * SECOND
        if action != "tick" and running:
            run = running.pop(0)
            h.finish(run, now, OK if action == "succeed" else retry_at(now + 30 * SECOND))
        running += h.step(now)
        assert len(running) <= 1, "two runs of a skip schedule at once"
        open_ = [s for s in states(db, h.sid) if s[1] in ("running", "retry_wait")]
        assert len(open_) <= 1
    rows = states(db, h.sid)
    assert [r[0] for r in rows] == list(range(0, rows[-1][0] + 1, every_s))  # none lost
    skipped = [r for r in rows if r[2] == "overlap"]
    assert all(r[1] == "missed" for r in skipped)
    assert len(overlap_events(db, tenant)) == len(skipped)  # every skip told
    db.close()
