"""Data for the benchmarks, written straight into a data directory's SQLite file before
the appliance starts (setup is not what is measured).

Two ways in:
- :func:`create_schedules` goes through the store's own ``create_schedule`` (ids, first
  cursor via croniter, a ``schedule.created`` event): exactly what the API would write.
  Used up to ~100k schedules.
- :func:`bulk_schedules` / :func:`bulk_runs` write plausible rows with big ``executemany``
  transactions for the 1M/10M sizes. The cursor is computed once per distinct timing
  (:class:`BulkTiming`: a cron expression and zone, or a one-off, an interval, bounds)
  with the appliance's own timing code; run ids have the real shape
  (``run_`` + 26 Crockford characters) but are not derived from the occurrence (deriving
  10M of them in Python would dominate setup). No events are written for bulk rows.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import math
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import apsw

from appliance.core.cursor import first_fire_at
from appliance.core.ids import idempotency_key, new_id
from appliance.core.instants import format_scheduled_for
from appliance.core.retry import RetryPolicy
from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.core.schedules import CatchupPolicy, PayloadKind, ScheduleSpec
from appliance.settings.model import DB_FILENAME
from appliance.store.infra.backend import Store
from appliance.store.infra.database import Database
from appliance.store.materialise import insert_runs, store_body
from appliance.store.schedules import create_schedule
from appliance.store.tenants import NewTenant, create_tenant

BODY = b'{"bench":true}'
CONTENT_TYPE = "application/json"

# Mixed expressions and zones (planner/scale). Five fields are minutes-first; six are
# seconds-first (Steeple's contract).
MIXED_CRONS = (
    "* * * * *",
    "*/5 * * * *",
    "0 * * * *",
    "*/15 * * * * *",
    "0 9 * * 1-5",
    "30 */2 * * *",
    "0 0 * * *",
    "*/10 * * * * *",
)
MIXED_ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Sydney")


def db_path(data_dir: Path) -> Path:
    return data_dir / DB_FILENAME


def open_store(data_dir: Path) -> Database:
    """The appliance's database in ``data_dir``, created and migrated."""
    return Database.open(db_path(data_dir))


def new_tenant(db: Store, *, name: str, now: int) -> NewTenant:
    return db.write_now(create_tenant, name=name, now=now)


def spec(
    *,
    target_url: str,
    cron: str,
    timezone: str = "UTC",
    name: str = "bench",
    jitter_seconds: int = 0,
) -> ScheduleSpec:
    return ScheduleSpec(
        name=name,
        cron=cron,
        timezone=timezone,
        target_url=target_url,
        payload_kind=PayloadKind.JSON,
        body=BODY,
        content_type=CONTENT_TYPE,
        headers=(),
        jitter_seconds=jitter_seconds,
        catchup_policy=CatchupPolicy.ALL,
        catchup_window_seconds=3600,
        retry=RetryPolicy(max_attempts=3),
        timeout_seconds=10,
        paused=False,
    )


def create_schedules(
    db: Store, *, tenant_id: str, specs: Sequence[ScheduleSpec], now: int, chunk: int = 20_000
) -> list[str]:
    """Create schedules through the store (one transaction per ``chunk``); their ids."""
    ids: list[str] = []

    def some(conn: apsw.Connection, part: Sequence[ScheduleSpec]) -> list[str]:
        return [create_schedule(conn, tenant_id=tenant_id, spec=s, now=now).id for s in part]

    for start in range(0, len(specs), chunk):
        ids += db.write_now(some, specs[start : start + chunk])
    return ids


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingRun:
    key: str
    scheduled_for: str


def pending_runs(
    db: Database, *, tenant_id: str, schedule_ids: Sequence[str], per_schedule: int, now: int
) -> list[PendingRun]:
    """``per_schedule`` pending runs per schedule, due in the last seconds before ``now``
    (whole seconds ``now - 1 s`` backwards). Real ids and keys (``core.runs.occurrence_run``)."""
    digest = db.write_now(store_body, content_type=CONTENT_TYPE, body=BODY)
    base = now - now % 1000
    rows: list[PendingRun] = []

    def insert(conn: apsw.Connection, sids: Sequence[str]) -> None:
        for sid in sids:
            for k in range(1, per_schedule + 1):
                at = base - k * 1000
                run = occurrence_run(
                    schedule_id=sid, tenant_id=tenant_id, schedule_version=1,
                    scheduled_for=at, due_at=at, state=RunState.PENDING,
                    trigger=Trigger.SCHEDULE, body_digest=digest,
                )  # fmt: skip
                insert_runs(conn, [run], now=now)
                rows.append(
                    PendingRun(key=run.idempotency_key, scheduled_for=format_scheduled_for(at))
                )

    for start in range(0, len(schedule_ids), 1000):
        db.write_now(insert, schedule_ids[start : start + 1000])
    return rows


# --- bulk rows --------------------------------------------------------------------------


def bulk_connection(path: Path) -> apsw.Connection:
    """A connection for setup only: no fsync, a big page cache."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-1000000")  # 1 GB
    return conn


@contextlib.contextmanager
def indexes_deferred(conn: apsw.Connection, tables: Sequence[str]) -> Iterator[None]:
    """Drop the named tables' own indexes for a bulk load and build them again after it:
    one sort per index instead of a random B-tree insert per row (10M runs: minutes, not an
    hour). Unique constraints' automatic indexes stay, so the load still checks them."""
    marks = ",".join("?" * len(tables))
    indexes = conn.execute(
        f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        f" AND tbl_name IN ({marks})",
        tuple(tables),
    ).fetchall()
    with conn:
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
    yield
    with conn:
        for _, sql in indexes:
            conn.execute(str(sql))


_SCHEDULE_SQL = (
    "INSERT INTO schedules (id, tenant_id, name, cron, timezone, at, every_seconds, start_at,"
    " end_at, target_url, payload_kind, body, content_type, headers, jitter_seconds,"
    " catchup_policy, catchup_window_seconds, max_attempts, timeout_seconds, paused,"
    " next_fire_at, version, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'json', ?, ?, '[]', 0, 'all', 3600, 8, 30, 0, ?, 1,"
    " ?, ?)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkTiming:
    """One schedule's timing columns, as the schedules table has them (core.timing): a
    cron expression in a zone (``cron`` set), or a one-off (``at``), or an interval
    (``every_seconds`` from its anchor ``start_at``); ``start_at``/``end_at`` bound any
    kind. Instants are epoch ms, whole seconds."""

    cron: str = ""
    timezone: str = "UTC"
    at: int | None = None
    every_seconds: int | None = None
    start_at: int | None = None
    end_at: int | None = None


def bulk_schedules(
    conn: apsw.Connection,
    *,
    tenant_ids: Sequence[str],
    crons: Sequence[tuple[str, str]],
    n: int,
    target_url: str,
    now: int,
    chunk: int = 50_000,
    seed: int = 7,
) -> list[str]:
    """``n`` active cron schedules, spread round-robin over tenants and (cron, timezone)
    pairs; their ids in creation order."""
    timings = [BulkTiming(cron=cron, timezone=zone) for cron, zone in crons]
    return bulk_timed_schedules(conn, tenant_ids=tenant_ids, timings=timings, n=n,
                                target_url=target_url, now=now, chunk=chunk, seed=seed)  # fmt: skip


def bulk_timed_schedules(
    conn: apsw.Connection,
    *,
    tenant_ids: Sequence[str],
    timings: Sequence[BulkTiming],
    n: int,
    target_url: str,
    now: int,
    chunk: int = 50_000,
    seed: int = 7,
) -> list[str]:
    """``n`` schedules, spread round-robin over tenants and ``timings``, each with its
    cursor (first occurrence after ``now``; NULL if it has none); their ids in creation
    order."""
    cursors: dict[BulkTiming, int | None] = {}
    for timing in timings:
        if timing not in cursors:
            cursors[timing] = _first_fire_at(timing, target_url=target_url, now=now)
    rng = random.Random(seed)
    ids: list[str] = []
    for start in range(0, n, chunk):
        rows = []
        for i in range(start, min(n, start + chunk)):
            created = now - 86_400_000 + i  # distinct ms: ids sort in creation order
            sid = new_id("sch", created, rng.randbytes)
            t = timings[i % len(timings)]
            rows.append((sid, tenant_ids[i % len(tenant_ids)], f"job {i}", t.cron, t.timezone,
                         t.at, t.every_seconds, t.start_at, t.end_at, target_url, BODY,
                         CONTENT_TYPE, cursors[t], created, created))  # fmt: skip
            ids.append(sid)
        with conn:
            conn.executemany(_SCHEDULE_SQL, rows)
    return ids


def _first_fire_at(timing: BulkTiming, *, target_url: str, now: int) -> int | None:
    timed = replace(spec(target_url=target_url, cron=timing.cron, timezone=timing.timezone),
                    at=timing.at, every_seconds=timing.every_seconds, start_at=timing.start_at,
                    end_at=timing.end_at)  # fmt: skip
    return first_fire_at(timed, schedule_id="sch_x", now=now)


# The planner's "kinds" mix, per 20 schedules: 8 cron (the mixed pairs, as the cron mix),
# 5 intervals, 3 one-offs, 4 bounded (2 cron, 2 interval).
KINDS_PATTERN = ("cron",) * 8 + ("every",) * 5 + ("at",) * 3 + ("bounded cron", "bounded every") * 2


def kinds_mix(n: int, *, t0: int, seed: int = 11) -> list[BulkTiming]:
    """``n`` timings of every kind around the minute [t0, t0 + 60 s) (t0 a whole second),
    in :data:`KINDS_PATTERN`'s proportions:

    - cron: the :data:`MIXED_CRONS` × :data:`MIXED_ZONES` pairs, round-robin;
    - interval: ``every_seconds`` log-uniform in 1–3600, anchored at a whole second up to
      a day before t0;
    - one-off: ``at`` a whole second in [t0, t0 + 180 s): a third inside the minute;
    - bounded: a cron pair or an interval whose bounds cut inside the minute — starting
      inside it, ending inside it, or both, in turn."""
    rng = random.Random(seed)
    pairs = [(c, z) for c in MIXED_CRONS for z in MIXED_ZONES]
    crons = 0
    timings: list[BulkTiming] = []
    for i in range(n):
        kind = KINDS_PATTERN[i % len(KINDS_PATTERN)]
        if kind == "at":
            timing = BulkTiming(at=t0 + 1000 * rng.randrange(180))
        elif kind.endswith("cron"):
            cron, zone = pairs[crons % len(pairs)]
            crons += 1
            timing = BulkTiming(cron=cron, timezone=zone)
        else:
            timing = _interval(rng, t0)
        if kind.startswith("bounded"):
            timing = _bounded(rng, timing, t0, variant=i // len(KINDS_PATTERN) % 3)
        timings.append(timing)
    return timings


def _interval(rng: random.Random, t0: int) -> BulkTiming:
    every = round(math.exp(rng.uniform(0.0, math.log(3600))))
    return BulkTiming(every_seconds=max(1, min(3600, every)),
                      start_at=t0 - 1000 * rng.randrange(86_400))  # fmt: skip


def _bounded(rng: random.Random, timing: BulkTiming, t0: int, *, variant: int) -> BulkTiming:
    """Variant 0 starts inside the minute, 1 ends inside it, 2 does both. An interval
    starting inside the minute is anchored there."""
    start = t0 + 1000 * rng.randrange(1, 45)
    if variant == 0:
        return replace(timing, start_at=start)
    if variant == 1:
        return replace(timing, end_at=t0 + 1000 * rng.randrange(60))
    return replace(timing, start_at=start, end_at=start + 1000 * rng.randrange(30))


_CROCKFORD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "0123456789ABCDEFGHJKMNPQRSTVWXYZ")
_RUN_SQL = (
    "INSERT INTO job_runs (id, tenant_id, schedule_id, schedule_version, scheduled_for,"
    " idempotency_key, due_at, state, trigger, body_digest, attempt, last_status,"
    " created_at, updated_at, finished_at)"
    " VALUES (?, ?, ?, 1, ?, ?, ?, ?, 'schedule', ?, 1, ?, ?, ?, ?)"
)
_SUCCEEDED = ("succeeded", "ok", 200)  # a run's state, its attempt's outcome and status
_ATTEMPT_SQL = (
    "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id, started_at,"
    " finished_at, outcome, http_status, latency_ms) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?)"
)


def _fast_run_id(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return "run_" + base64.b32encode(digest[:20]).decode().translate(_CROCKFORD)[:26]


def bulk_runs(
    conn: apsw.Connection,
    *,
    tenant_of: Sequence[str],
    schedule_ids: Sequence[str],
    per_schedule: int,
    now: int,
    chunk: int = 200_000,
    with_attempts: bool = True,
    failed_every: int = 0,
) -> int:
    """``per_schedule`` succeeded runs (and their one attempt) per schedule, one a minute
    before ``now``; with ``failed_every`` = N, about one run in N (spread over schedules,
    hence tenants) failed instead, its attempt answered 500. Returns the number of run rows."""
    digest = hashlib.sha256(CONTENT_TYPE.encode() + b"\0" + BODY).hexdigest()
    with conn:
        conn.execute(
            "INSERT OR IGNORE INTO bodies (digest, content_type, body) VALUES (?, ?, ?)",
            (digest, CONTENT_TYPE, BODY),
        )
    base = now - now % 60_000
    times = [(base - k * 60_000, format_scheduled_for(base - k * 60_000))
             for k in range(per_schedule, 0, -1)]  # fmt: skip
    incarnation = new_id("inc", now)
    runs: list[tuple[object, ...]] = []
    attempts: list[tuple[object, ...]] = []
    total = 0
    for index, sid in enumerate(schedule_ids):
        tenant = tenant_of[index]
        for k, (at, text) in enumerate(times):
            rid = _fast_run_id("run:" + sid + text)
            failed = failed_every > 0 and (index + k) % failed_every == 0
            state, outcome, status = ("failed", "permanent", 500) if failed else _SUCCEEDED
            runs.append((rid, tenant, sid, at, idempotency_key(sid, text), at, state, digest,
                         status, at, at + 40, at + 40))  # fmt: skip
            if with_attempts:
                attempts.append((rid, os.urandom(16).hex(), incarnation, at, at + 40, outcome,
                                 status, 40))  # fmt: skip
        if len(runs) >= chunk:
            total += _flush(conn, runs, attempts)
    return total + _flush(conn, runs, attempts)


def _flush(
    conn: apsw.Connection, runs: list[tuple[object, ...]], attempts: list[tuple[object, ...]]
) -> int:
    count = len(runs)
    with conn:
        conn.executemany(_RUN_SQL, runs)
        conn.executemany(_ATTEMPT_SQL, attempts)
    runs.clear()
    attempts.clear()
    return count
