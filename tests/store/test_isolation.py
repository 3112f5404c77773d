"""The store functions that run ``READ COMMITTED`` on PostgreSQL, raced by two replicas
(two stores on one database, as two processes would hold them) on a real server.

Each race is ordered, not hoped for: one replica's transaction is held open inside the
function under test (its statements done, not committed), the other runs the same or a
conflicting function meanwhile, and the test waits until that one is either finished or
seen waiting on a row lock before it lets the first commit
(docs/adr/0044-postgresql-store.md, "Isolation by rule").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from appliance.core.events import EventType
from appliance.core.runs import AttemptOutcome, RunState
from appliance.store.claims import ClaimBatch, claim_runs, renew_leases
from appliance.store.completions import Finished, complete_runs
from appliance.store.events import append_event
from appliance.store.infra.connection import Isolation, isolation_by, isolation_of
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.leadership import lead
from appliance.store.notifications import claim_notifications, set_target
from appliance.store.pauses import pause_schedule
from appliance.store.runs import list_attempts
from appliance.store.suspension import suspend_tenant
from appliance.store.tenants import create_tenant
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.usecases.reclaim import reclaim_expired
from tests.store.conftest import T0, ScheduleRow, add_due, insert_schedule
from tests.store.test_runs import ok, retry

pytestmark = pytest.mark.postgres
LEASE = 30_000
WAIT_S = 30.0


@pytest.fixture
def replicas(pg_store_dsn: str) -> Iterator[tuple[PgDatabase, PgDatabase]]:
    a, b = PgDatabase.open(pg_store_dsn), PgDatabase.open(pg_store_dsn)
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def tenant(replicas: tuple[PgDatabase, PgDatabase]) -> tuple[str, str]:
    a, _ = replicas
    tenant_id = a.write_now(create_tenant, name="acme", now=T0).tenant_id
    schedule = a.write_now(insert_schedule, tenant_id=tenant_id, row=ScheduleRow(), now=T0)
    return tenant_id, schedule


class Held:
    """``fn`` run by ``db`` in a thread, at ``fn``'s declared isolation, its transaction
    held open after ``fn`` returned until :meth:`commit`."""

    def __init__(self, db: PgDatabase, fn: Callable[..., Any], **kw: Any) -> None:
        self._entered, self._release = threading.Event(), threading.Event()
        self.result: Any = None

        @isolation_by(lambda **given: isolation_of(fn, **given))
        def holding(conn: Any, **given: Any) -> Any:
            found = fn(conn, **given)
            self._entered.set()
            assert self._release.wait(WAIT_S)
            return found

        def run() -> None:
            self.result = db.write_now(holding, **kw)

        self._thread = threading.Thread(target=run)
        self._thread.start()
        assert self._entered.wait(WAIT_S), "the held transaction never ran"

    def commit(self) -> Any:
        self._release.set()
        self._thread.join(WAIT_S)
        return self.result


class Background:
    """``fn`` written by ``db`` in a thread (it may wait on a lock the test holds)."""

    def __init__(self, db: PgDatabase, fn: Callable[..., Any], **kw: Any) -> None:
        self.result: Any = None
        self._thread = threading.Thread(
            target=lambda: setattr(self, "result", db.write_now(fn, **kw))
        )
        self._thread.start()

    def join(self) -> Any:
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive()
        return self.result


def wait_until_lock_waiting(dsn: str) -> None:
    """Until a backend of this database waits for a row lock (the raced write reached
    the row the held transaction holds)."""
    deadline = time.monotonic() + WAIT_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the raced write never waited for the held row")


def claim(**kw: Any) -> dict[str, Any]:
    return {"now": T0 + 60_000, "lease_ms": LEASE, **kw}


def test_the_hot_functions_declare_read_committed() -> None:
    assert isolation_of(claim_runs) is Isolation.READ_COMMITTED
    assert isolation_of(renew_leases) is Isolation.READ_COMMITTED
    assert isolation_of(claim_notifications) is Isolation.READ_COMMITTED
    assert isolation_of(lead) is Isolation.READ_COMMITTED
    assert isolation_of(reclaim_expired) is Isolation.SERIALIZABLE


def test_two_claims_never_take_the_same_run(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str], pg_store_dsn: str
) -> None:
    a, b = replicas
    add_due(a, *tenant, count=5, first_due=T0)
    first = Held(a, claim_runs, **claim(owner="inc_a", limit=3))
    second = Background(b, claim_runs, **claim(owner="inc_b", limit=10))
    wait_until_lock_waiting(pg_store_dsn)  # the tenant's row: the claims take turns
    taken_a: ClaimBatch = first.commit()
    taken_b: ClaimBatch = second.join()
    ids_a = {run.run_id for run in taken_a.runs}
    ids_b = {run.run_id for run in taken_b.runs}
    assert len(ids_a) == 3 and len(ids_b) == 2 and not ids_a & ids_b


def test_two_claims_keep_the_tenants_cap_between_them(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str], pg_store_dsn: str
) -> None:
    """Without the tenant's lock, the second claim would skip the first one's rows and
    take three more: six running under a cap of three."""
    a, b = replicas
    add_due(a, *tenant, count=6, first_due=T0)
    first = Held(a, claim_runs, **claim(owner="inc_a", limit=3, tenant_cap=3))
    second = Background(b, claim_runs, **claim(owner="inc_b", limit=3, tenant_cap=3))
    wait_until_lock_waiting(pg_store_dsn)
    assert len(first.commit().runs) == 3
    later: ClaimBatch = second.join()
    assert later.runs == () and later.capped == frozenset({tenant[0]})


def test_a_stale_completion_after_a_reclaim_never_lands(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str], pg_store_dsn: str
) -> None:
    """The reaper's reclaim holds the run; the completion waits for it, then finds its
    lease token gone: recorded stale, and the run stays the reclaim's."""
    a, b = replicas
    add_due(a, *tenant, count=1, first_due=T0)
    (run,) = a.write_now(claim_runs, **claim(owner="inc_a", limit=1)).runs
    lapsed = run.lease_expires_at + 1
    reaper = Held(b, reclaim_expired, now=lapsed, ceiling_ms=10 * LEASE, limit=10)
    late = Background(a, complete_runs, done=[Finished(run, ok(), lapsed)])
    wait_until_lock_waiting(pg_store_dsn)
    assert reaper.commit() == 1
    assert late.join() == [False]
    (attempt,) = a.read_now(list_attempts, run_id=run.run_id)
    assert attempt.outcome is AttemptOutcome.STALE
    with psycopg.connect(pg_store_dsn) as conn:
        row = conn.execute("SELECT state FROM job_runs WHERE id = %s", (run.run_id,)).fetchone()
    assert row is not None and row[0] != RunState.SUCCEEDED.value  # the reclaim's
    (again,) = b.write_now(claim_runs, **claim(owner="inc_b", limit=1, now=lapsed)).runs
    assert again.run_id == run.run_id and again.lease_token != run.lease_token
    assert b.write_now(complete_runs, [Finished(again, ok(), lapsed)]) == [True]


def test_a_completion_batch_with_a_retry_runs_serializable(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str]
) -> None:
    """A retry may be withdrawn by a pause in flight, whose schedule it reads
    (docs/adr/0044-postgresql-store.md): that batch keeps ``SERIALIZABLE``."""
    a, _ = replicas
    add_due(a, *tenant, count=1, first_due=T0)
    (run,) = a.write_now(claim_runs, **claim(owner="inc_a", limit=1)).runs
    done = [Finished(run, ok(), T0)]
    assert isolation_of(complete_runs, done) is Isolation.READ_COMMITTED
    retried = [*done, Finished(run, retry(T0 + 1), T0)]
    assert isolation_of(complete_runs, retried) is Isolation.SERIALIZABLE


def test_a_retry_answered_while_a_pause_is_in_flight_is_withdrawn(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str], pg_store_dsn: str
) -> None:
    """Why a batch with a retry stays ``SERIALIZABLE``: the pause, open in one replica,
    withdraws the open runs its snapshot shows; the attempt's answer, a retry, commits in
    the other meanwhile. Under ``READ COMMITTED`` the run would be left waiting to retry
    on a paused schedule; serializable, one of the two runs again and it is cancelled."""
    a, b = replicas
    tenant_id, schedule = tenant
    add_due(a, *tenant, count=1, first_due=T0)
    (run,) = a.write_now(claim_runs, **claim(owner="inc_a", limit=1)).runs
    paused_at = T0 + 61_000
    pause = Held(b, pause_schedule, tenant_id=tenant_id, schedule_id=schedule, now=paused_at)
    answer = [Finished(run, retry(paused_at + 60_000), paused_at)]
    assert a.write_now(complete_runs, answer) == [True]
    pause.commit()
    with psycopg.connect(pg_store_dsn) as conn:
        row = conn.execute("SELECT state FROM job_runs WHERE id = %s", (run.run_id,)).fetchone()
    assert row is not None and row[0] == RunState.CANCELLED.value


def test_runs_planned_while_a_suspension_is_in_flight_are_cancelled(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str], pg_store_dsn: str
) -> None:
    """Why the planner stays ``SERIALIZABLE``: a suspension, open in one replica, cancels
    the open runs its snapshot shows; the other replica's planner inserts the schedule's
    next runs meanwhile. Serializable, one of the two runs again, and no run of the
    suspended tenant is left to deliver."""
    a, b = replicas
    tenant_id, _ = tenant
    suspension = Held(b, suspend_tenant, tenant_id=tenant_id, now=T0)
    planned = a.write_now(plan_once, now=T0 + 60_000, config=PlannerConfig())
    assert planned.materialised > 0
    suspension.commit()
    with psycopg.connect(pg_store_dsn) as conn:
        (open_runs,) = conn.execute(
            "SELECT count(*) FROM job_runs WHERE tenant_id = %s AND state = 'pending'",
            (tenant_id,),
        ).fetchone() or (None,)
    assert open_runs == 0


def test_a_completion_after_its_reclaim_committed_never_lands(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str]
) -> None:
    """The other order: the new claim holds the run under a new token while the old
    attempt's answer arrives; it lands nowhere, and the new attempt's does."""
    a, b = replicas
    add_due(a, *tenant, count=1, first_due=T0)
    (run,) = a.write_now(claim_runs, **claim(owner="inc_a", limit=1)).runs
    lapsed = run.lease_expires_at + 1
    assert b.write_now(reclaim_expired, now=lapsed, ceiling_ms=10 * LEASE, limit=10) == 1
    reclaimer = Held(b, claim_runs, **claim(owner="inc_b", limit=1, now=lapsed))
    assert a.write_now(complete_runs, [Finished(run, ok(), lapsed)]) == [False]
    (again,) = reclaimer.commit().runs
    assert b.write_now(complete_runs, [Finished(again, ok(), lapsed)]) == [True]


def test_a_heartbeat_never_revives_a_lease_the_reaper_is_taking(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str], pg_store_dsn: str
) -> None:
    a, b = replicas
    add_due(a, *tenant, count=1, first_due=T0)
    (run,) = a.write_now(claim_runs, **claim(owner="inc_a", limit=1)).runs
    lapsed = run.lease_expires_at + 1
    reaper = Held(b, reclaim_expired, now=lapsed, ceiling_ms=10 * LEASE, limit=10)
    # A heartbeat whose clock is behind the reaper's: the lease looks alive to it.
    beat = Background(a, renew_leases, owner="inc_a", now=run.lease_expires_at, lease_ms=LEASE)
    wait_until_lock_waiting(pg_store_dsn)
    reaper.commit()
    assert beat.join() == frozenset()


def test_two_notifiers_never_take_the_same_notification(
    replicas: tuple[PgDatabase, PgDatabase], tenant: tuple[str, str]
) -> None:
    """The first notifier's rows are locked: the second passes over them, without
    waiting, and takes the rest."""
    a, b = replicas
    tenant_id, _ = tenant
    a.write_now(set_target, tenant_id=tenant_id, url="https://tenant.example/f", now=T0)
    for k in range(5):
        a.write_now(append_event, tenant_id=tenant_id, type=EventType.RUN_FAILED, now=T0,
                    schedule_id="sch_1", run_id=f"run_{k}", data={"reason": "gone"})  # fmt: skip
    first = Held(a, claim_notifications, now=T0, lease_ms=LEASE, limit=3)
    others = b.write_now(claim_notifications, now=T0, lease_ms=LEASE, limit=10)
    mine = first.commit()
    ids_a, ids_b = {n.id for n in mine}, {n.id for n in others}
    assert len(ids_a) == 3 and len(ids_b) == 2 and not ids_a & ids_b


def test_two_replicas_electing_at_once_agree_on_one_leader(
    replicas: tuple[PgDatabase, PgDatabase], pg_store_dsn: str
) -> None:
    a, b = replicas
    first = Held(a, lead, incarnation_id="inc_a", now=T0, term_ms=3_000)
    second = Background(b, lead, incarnation_id="inc_b", now=T0, term_ms=3_000)
    wait_until_lock_waiting(pg_store_dsn)
    assert first.commit().holder == "inc_a"
    assert second.join().holder == "inc_a"
