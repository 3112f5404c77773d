"""Scenario 12 — several replicas on one PostgreSQL database (docs/scale-out.md, ADR 0044).

Three ``steeple serve --database`` replicas share one throwaway PostgreSQL database; two
of them run under libfaketime with their clocks 5 minutes ahead and 5 minutes behind
(they follow the database's clock: ``clock.SharedClock``). Two schedules fire every
second (one jittered). Each round, in the fast profile once and in ``--soak`` until the
soak minutes are spent:

1. **PostgreSQL restarts** (``pg_ctl stop -m fast``, down a few seconds, ``start``).
   While it is down, each replica's ``/healthz`` and ``/readyz`` are read. Every replica
   rides the outage out: its transactions wait for the server and run again
   (store/infra/postgres/database.py, "An outage is waited out"), so none exits
   (``db_restart_exits`` is 0). A replica that did exit would be started again, as its
   service manager would (``Restart=on-failure``), so the other invariants are still
   checked.
2. **A zombie**: the replica sending a delivery is frozen with SIGSTOP while the request
   is open, the request is then answered 200 into its socket, and it stays frozen until
   another replica took the run back (its lease lapsed, 30 s) and delivered it again.
   Then SIGCONT: its completion must be fenced (it logs that it recorded ``stale``).
3. **SIGKILLs while the zombie is frozen**: a random live replica (the first, the leader
   when the zombie is not it), after a random number of deliveries and a random delay, is
   killed and started again. Fail-over time: from the kill to the next delivery sent by
   another replica (the sender of each copy is read from the database: its attempt names
   the claiming incarnation, which names a pid). Leader fail-over time: from the leader's
   kill to another replica's live term in the ``leader`` table.

Then a quiet period: every occurrence of the window must succeed; the schedules are paused,
the replicas stopped (SIGTERM, exit 0). Invariants: 0 lost, 0 duplicate rows, 0
different-key copies, nothing unexpected, effects = occurrences = rows, no overlapping
lease, rows in order, every zombie fenced. Same-key copies are allowed (at least once).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.chaos.conftest import Profile
from tests.chaos.recorder import (
    all_succeeded,
    classify,
    duplicate_rows,
    expected_occurrences,
    lease_violations,
    open_runs,
    out_of_order_rows,
    outcome_counts,
    publish,
    query,
    run_states,
)
from tests.chaos.test_clock_jumps import LIBFAKETIME, faketime_env
from tests.chaos.test_sigkill_loop import wait_until
from tests.e2e.harness import ANSWER, Action, Appliance, Delivery, Receiver, create_tenant
from tests.e2e.replicas import first_arrival, sender_of, senders, start_all
from tests.postgres_cluster import Cluster

pytestmark = pytest.mark.slow

SKEWS_S = (0, 300, -300)  # each replica's clock against the true time: ±5 min
SCHEDULES = (("tick-a", "* * * * * *", 0), ("tick-b", "* * * * * *", 1))
LEASE_S = 30  # DispatchConfig.lease_ms, which no setting changes
WAIT_S = 60.0
DOWN_S = 3.0  # how long PostgreSQL stays down
FENCED_LOG = "after its lease was taken away: recorded stale"
# time.sleep through select() under libfaketime (the directory's sitecustomize says why)
SLEEP_SHIM = Path(__file__).parent / "faketime_sleep"
NO_FAKETIME = "Debian's faketime (libfaketime) is not installed: apt-get install faketime"


@dataclass
class Freezer:
    """Holds the first delivery after :meth:`arm` open until the test froze its sender,
    then answers it 200 (into the socket of a stopped process)."""

    held: list[Delivery] = field(default_factory=list)
    armed: bool = False
    arrived: threading.Event = field(default_factory=threading.Event)
    frozen: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self) -> None:
        with self.lock:
            self.held, self.armed = [], True
            self.arrived, self.frozen = threading.Event(), threading.Event()

    def respond(self, delivery: Delivery) -> Action:
        with self.lock:
            if not self.armed:
                return ANSWER
            self.armed = False
            self.held.append(delivery)
            arrived, frozen = self.arrived, self.frozen
        arrived.set()
        frozen.wait(WAIT_S)
        return ANSWER

    def release(self) -> None:
        with self.lock:
            self.armed = False
        self.frozen.set()


@pytest.fixture
def freezer() -> Freezer:
    return Freezer()


@pytest.fixture
def receiver(freezer: Freezer) -> Iterator[Receiver]:
    r = Receiver(respond=freezer.respond)
    yield r
    freezer.release()
    r.close()


@dataclass
class Replica:
    """One replica's data directory and clock; :attr:`app` is its current process."""

    name: str
    data_dir: Path
    dsn: str
    env: dict[str, str]
    app: Appliance = field(init=False)
    pids: list[int] = field(default_factory=list)  # every process it has run as
    logs: list[str] = field(default_factory=list)  # the log lines of its earlier processes

    def __post_init__(self) -> None:
        self.fresh()

    def fresh(self) -> Appliance:
        self.app = Appliance(self.data_dir, "--database", self.dsn, env=self.env)
        return self.app

    def restart(self) -> None:
        restart_all([self])

    @property
    def alive(self) -> bool:
        return self.app.proc is not None and self.app.proc.poll() is None


def restart_all(replicas: list[Replica]) -> None:
    """Start a new process for each replica (side by side), its old one's log kept."""
    for r in replicas:
        r.logs += r.app.log
        r.fresh()
    start_all([r.app for r in replicas], WAIT_S)
    for r in replicas:
        r.pids.append(r.app.pid)


@dataclass
class Books:
    """What the scenario did, for its figures."""

    kills: list[tuple[int, float]] = field(default_factory=list)  # (pid, monotonic instant)
    db_restarts: int = 0
    db_restart_exits: int = 0
    outage_health: list[str] = field(default_factory=list)  # per replica: health() 1 s in
    zombies: int = 0
    zombie_fenced: int = 0
    zombie_reclaim_s: list[float] = field(default_factory=list)
    leader_failover_ms: list[float] = field(default_factory=list)  # killed leader → next


def faketime_skews(tmp_path: Path) -> list[dict[str, str]]:
    envs: list[dict[str, str]] = []
    for n, skew in enumerate(SKEWS_S):
        if skew == 0:
            envs.append({})
            continue
        offset = tmp_path / f"faketime-{n}"
        offset.write_text(f"{skew:+d}\n")
        path = os.pathsep.join(filter(None, [str(SLEEP_SHIM), os.environ.get("PYTHONPATH")]))
        envs.append({**faketime_env(offset), "PYTHONPATH": path})
    return envs


@pytest.mark.skipif(
    shutil.which("faketime") is None or not LIBFAKETIME.exists(), reason=NO_FAKETIME
)
def test_replicas_lose_nothing_and_duplicate_only_with_the_same_key(
    tmp_path: Path,
    pg_cluster: Cluster,
    pg_store_dsn: str,
    profile: Profile,
    freezer: Freezer,
    receiver: Receiver,
) -> None:
    rng = profile.rng()
    dsn = pg_store_dsn
    tenant = create_tenant(tmp_path / "replica-0", database=dsn)
    replicas = [
        Replica(f"replica-{n}", tmp_path / f"replica-{n}", dsn, env)
        for n, env in enumerate(faketime_skews(tmp_path))
    ]
    books = Books()
    try:
        restart_all(replicas)
        schedules = create_schedules(replicas[0].app, tenant["api_key"], receiver.url)
        receiver.wait_for(lambda ds: len(ds) >= 3, WAIT_S)
        deadline = time.monotonic() + profile.minutes * 60
        rounds = 0
        while rounds < 1 or (profile.soak and time.monotonic() < deadline):
            restart_postgres(pg_cluster, replicas, receiver, books)
            zombie_with_kills(replicas, dsn, freezer, receiver, rng, books, profile)
            rounds += 1
        until_ms = time.time_ns() // 1_000_000 + 2_000  # this machine's clock is the database's
        created = {
            str(sid): int(str(at)) for sid, at in query(dsn, "SELECT id, created_at FROM schedules")
        }
        expected = [
            occurrence
            for sid, (cron, jitter) in schedules.items()
            for occurrence in expected_occurrences(
                sid, cron, after_ms=created[sid], until_ms=until_ms, jitter_seconds=jitter
            )
        ]
        wait_until(
            lambda: all_succeeded(dsn, expected),
            "every occurrence of the window to succeed",
            LEASE_S + WAIT_S,
        )
        with replicas[0].app.client(tenant["api_key"]) as api:
            for sid in schedules:
                api.post(f"/v1/schedules/{sid}/pause").raise_for_status()
        wait_until(lambda: open_runs(dsn) == 0, "no open run", LEASE_S + WAIT_S)
        unexpected_exits = [r.name for r in replicas if not r.alive]
    except BaseException:
        for r in replicas:
            print(f"--- {r.name} log:\n" + "".join(r.app.log))  # shown with the failure
        raise
    finally:
        codes = {r.name: stop(r) for r in replicas}
    assert unexpected_exits == [], unexpected_exits
    assert set(codes.values()) == {0}, codes

    deliveries = receiver.snapshot()
    figures = classify(deliveries, expected, until_ms=until_ms)
    rows = len([o for o in run_states(dsn) if o[1] <= until_ms])
    failover = failover_ms(dsn, deliveries, books.kills)
    publish(
        "replicas",
        seed=profile.seed,
        replicas=len(replicas),
        skews="/".join(f"{s:+d}s" for s in SKEWS_S),
        rounds=rounds,
        kills=len(books.kills),
        db_restarts=books.db_restarts,
        db_restart_exits=books.db_restart_exits,
        outage_health=",".join(f"{k}:{n}" for k, n in Counter(books.outage_health).items()),
        zombies=books.zombies,
        zombie_fenced=books.zombie_fenced,
        zombie_reclaim_s_max=round(max(books.zombie_reclaim_s), 1),
        **figures.as_dict(),
        rows=rows,
        dup_rows=duplicate_rows(dsn),
        abandoned=outcome_counts(dsn).get("abandoned", 0),
        stale=outcome_counts(dsn).get("stale", 0),
        failover_ms_p50=round(statistics.median(failover)) if failover else "-",
        failover_ms_max=round(max(failover)) if failover else "-",
        leader_failovers=len(books.leader_failover_ms),
        leader_failover_ms_max=round(max(books.leader_failover_ms))
        if books.leader_failover_ms
        else "-",
    )
    assert figures.lost == 0, figures.lost_list
    assert figures.dup_diff_key == 0, figures.bad_keys
    assert figures.unexpected == 0, figures.unexpected_list
    assert figures.effects == figures.occurrences == rows
    assert duplicate_rows(dsn) == 0
    assert lease_violations(dsn) == []
    assert out_of_order_rows(dsn) == []
    assert books.zombie_fenced == books.zombies >= 1
    assert books.db_restart_exits == 0  # every replica rode each outage out…
    assert set(books.outage_health) == {"200/503"}  # …alive, and out of the balancer
    for r, skew in zip(replicas, SKEWS_S, strict=True):  # the skews were real, and followed
        assert skew == 0 or any(abs(o - skew * 1000) < 2_000 for o in offsets_logged(r)), r.name
    assert len(failover) == len(books.kills)  # a survivor delivered after every kill
    # A killed leader's successor leads within a term and a renewal (3 s + 1 s), with room
    # for a loaded machine.
    assert all(ms < 8_000 for ms in books.leader_failover_ms), books.leader_failover_ms


OFFSET_LOG = re.compile(r"this machine's clock is ([+-]\d+) ms off the database's")


def offsets_logged(replica: Replica) -> list[int]:
    """The clock offsets the replica's processes measured at start (logged when > 1 s)."""
    lines = [*replica.logs, *replica.app.log]
    return [int(m.group(1)) for line in lines for m in OFFSET_LOG.finditer(line)]


def create_schedules(app: Appliance, api_key: str, url: str) -> dict[str, tuple[str, int]]:
    made: dict[str, tuple[str, int]] = {}
    with app.client(api_key) as api:
        for name, cron, jitter in SCHEDULES:
            body = {"name": name, "cron": cron, "target_url": url, "jitter_seconds": jitter}
            created = api.post("/v1/schedules", json={**body, "payload": {"n": name}})
            assert created.status_code == 201, created.text
            made[created.json()["id"]] = (cron, jitter)
    return made


def restart_postgres(
    cluster: Cluster, replicas: list[Replica], receiver: Receiver, books: Books
) -> None:
    """Stop PostgreSQL, read every replica's health while it is down, start it again;
    start again any replica that exited meanwhile, and wait for deliveries to resume."""
    with postgres_down(cluster):
        books.db_restarts += 1
        down_until = time.monotonic() + DOWN_S
        threading.Event().wait(1.0)  # the outage's first second (an injected duration)
        books.outage_health += [health(r) for r in replicas]
        threading.Event().wait(max(down_until - time.monotonic(), 0))
    exited = [r for r in replicas if not r.alive]
    for r in exited:
        r.app.kill()  # reaps it
    books.db_restart_exits += len(exited)
    restart_all(exited)
    back = time.monotonic()
    receiver.wait_for(lambda ds: any(d.arrived > back for d in ds), WAIT_S)


@contextmanager
def postgres_down(cluster: Cluster) -> Iterator[None]:
    """PostgreSQL stopped inside the block, started again (same port) on the way out."""
    cluster.pg_ctl("stop", "-m", "fast", "-w", "-t", "60")
    try:
        yield
    finally:
        port = f"-p {cluster.port}"
        cluster.pg_ctl("start", "-w", "-t", "60", "-l", str(cluster.log_file), "-o", port)


def health(replica: Replica) -> str:
    """``healthz/readyz`` status codes, ``exited`` or ``unanswered``."""
    if not replica.alive:
        return "exited"
    codes: list[str] = []
    for path in ("/healthz", "/readyz"):
        try:
            codes.append(str(httpx.get(replica.app.base_url + path, timeout=3).status_code))
        except httpx.HTTPError:
            codes.append("unanswered")
    return "/".join(codes)


def zombie_with_kills(
    replicas: list[Replica],
    dsn: str,
    freezer: Freezer,
    receiver: Receiver,
    rng: random.Random,
    books: Books,
    profile: Profile,
) -> None:
    """Freeze the sender of the next delivery, kill the others in turn while it is frozen,
    thaw it once its run went out again from another replica; check it was fenced."""
    freezer.arm()
    assert freezer.arrived.wait(WAIT_S), "no delivery arrived to hold"
    (held,) = freezer.held
    zombie = next(r for r in replicas if r.app.pid == sender_of(dsn, held))
    freeze(zombie, dsn)
    frozen_at = time.monotonic()
    freezer.frozen.set()  # answer 200 into the frozen process's socket
    books.zombies += 1
    others = [r for r in replicas if r is not zombie]
    for n in range(profile.pick(3, 4)):
        seen = len(receiver.snapshot())
        receiver.wait_for(lambda ds, seen=seen: len(ds) >= seen + rng.randint(1, 3), WAIT_S)
        threading.Event().wait(rng.uniform(0, 0.8))  # the injected timing, not a wait
        leading = [r for r in others if r.app.pid == leader_pid(dsn)]
        victim = leading[0] if n == 0 and leading else rng.choice(others)  # the leader first
        led = leader_pid(dsn) == victim.app.pid
        victim.app.kill(signal.SIGKILL)
        killed_at = time.monotonic()
        books.kills.append((victim.app.pid, killed_at))
        if led:  # how long the planner, reaper and pruner had no leader
            dead = victim.app.pid
            wait_until(
                lambda dead=dead: leader_pid(dsn) not in (None, dead), "a new leader", WAIT_S
            )
            books.leader_failover_ms.append((time.monotonic() - killed_at) * 1000)
        victim.restart()
    receiver.wait_for(
        lambda ds: any(d.key == held.key and d.attempt > held.attempt for d in ds),
        LEASE_S + WAIT_S,
    )
    books.zombie_reclaim_s.append(time.monotonic() - frozen_at)
    os.kill(zombie.app.pid, signal.SIGCONT)
    wait_until(lambda: any(FENCED_LOG in line for line in zombie.app.log), "the zombie's fence")
    books.zombie_fenced += 1


def leader_pid(dsn: str) -> int | None:
    """The process of the replica whose leader term is live by the database's clock."""
    import psycopg  # the database's own clock, in its own dialect

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as raw:
        row = raw.execute(
            "SELECT i.pid FROM leader l JOIN incarnations i ON i.id = l.holder"
            " WHERE l.expires_at > CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)"
        ).fetchone()
    return int(row[0]) if row else None


def freeze(replica: Replica, dsn: str) -> None:
    """SIGSTOP at an instant none of its connections is inside a transaction: a frozen
    transaction would hold its row locks, and other replicas' writes would wait on them
    until their statement timeout (a different failure than a zombie's)."""
    for _ in range(100):
        os.kill(replica.app.pid, signal.SIGSTOP)
        threading.Event().wait(0.2)  # a live replica's transaction ends well within this
        if not idle_in_transaction(dsn, older_than_ms=150):
            return
        os.kill(replica.app.pid, signal.SIGCONT)
        threading.Event().wait(0.05)
    raise AssertionError("could not freeze the replica outside a transaction")


def idle_in_transaction(dsn: str, *, older_than_ms: int) -> bool:
    import psycopg  # PostgreSQL's own catalogue, in its own dialect (no store statement)

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as raw:
        row = raw.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state IN ('idle in transaction', 'active') AND pid <> pg_backend_pid()"
            " AND state_change < clock_timestamp() - %s * interval '1 millisecond'",
            (older_than_ms,),
        ).fetchone()
    return row is not None and int(row[0]) > 0


def stop(replica: Replica) -> int | str:
    if not replica.alive:  # reaped, and its log pipe closed
        return f"exited {replica.app.kill() if replica.app.proc else '-'}"
    os.kill(replica.app.pid, signal.SIGCONT)  # in case it is frozen
    return replica.app.kill(signal.SIGTERM)


def failover_ms(
    dsn: str, deliveries: list[Delivery], kills: list[tuple[int, float]]
) -> list[float]:
    """For each kill: the time to the next copy another process sent."""
    sent_by = senders(dsn)
    found: list[float] = []
    for pid, at in kills:
        arrival = first_arrival(
            deliveries,
            after=at,
            sent_by=lambda d, pid=pid: sent_by.get((d.run_id, d.attempt), pid) != pid,
        )
        if arrival is not None:
            found.append((arrival - at) * 1000)
    return found


def test_a_replica_rides_out_a_postgresql_restart(
    tmp_path: Path, pg_cluster: Cluster, pg_store_dsn: str, receiver: Receiver
) -> None:
    """docs/scale-out.md, "Health": while the database is unreachable /healthz answers 200
    and /readyz 503; the replica retries on its own and delivers again once it is back."""
    tenant = create_tenant(tmp_path, database=pg_store_dsn)
    replica = Replica("replica", tmp_path, pg_store_dsn, {})
    replica.restart()
    try:
        create_schedules(replica.app, tenant["api_key"], receiver.url)
        receiver.wait_for(lambda ds: len(ds) >= 2, WAIT_S)
        with postgres_down(pg_cluster):
            wait_until(
                lambda: not replica.alive or health(replica) == "200/503",
                "/healthz 200 and /readyz 503 while the database is down",
                15,
            )
            assert replica.alive, "".join(replica.app.log[-3:])
            threading.Event().wait(DOWN_S)  # the outage (an injected duration)
            assert replica.alive, "".join(replica.app.log[-3:])
        wait_until(lambda: health(replica) == "200/200", "/readyz 200 again", 30)
        back = time.monotonic()
        receiver.wait_for(lambda ds: any(d.arrived > back for d in ds), WAIT_S)
        assert replica.alive
    finally:
        stop(replica)
