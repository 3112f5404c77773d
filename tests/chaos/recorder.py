"""The chaos suite's books: what the tenant saw, what the database holds, one line of figures.

**What the tenant saw.** Every request the recording endpoint received (a
:class:`tests.e2e.harness.Delivery`, from the loopback receiver or built from an
``Received`` in process) is one *copy* of one occurrence ``(schedule_id,
scheduled_for)``. Against the occurrences a scenario *expects* — computed from the cron
expression with ``appliance.core.cron``/``jitter`` over the observed window — each
occurrence is classified:

- **delivered** — at least one copy arrived;
- **lost** — expected, no copy arrived (ADR 0034 promises 0);
- **duplicated, same key** — more than one copy, every copy carrying the contract's key
  ``sha256(schedule_id ‖ scheduled_for)`` (allowed: at-least-once, dedupe on the key);
- **duplicated, different key** — copies whose keys differ, or a key that is not the
  contract's (never allowed, counted whether or not it was duplicated);
- **unexpected** — a copy of an occurrence the schedule should not have delivered (a
  ``missed`` one, say), inside the window.

``effects`` is what a tenant deduplicating on the key applies: distinct keys received.

**What the database holds** (read with a separate read-only connection, also while the
appliance runs): duplicate rows per occurrence, open runs, rows materialised out of order,
and overlapping leases (defined at :func:`lease_violations`).

Every scenario ends with :func:`publish`: one line ``[chaos] <scenario> k=v …``, printed
and repeated in the run's summary.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from appliance.core.cron import parse_cron
from appliance.core.ids import idempotency_key
from appliance.core.instants import format_scheduled_for, parse_instant
from appliance.core.jitter import PlannedOccurrence, planned_occurrences, planned_timing
from appliance.core.timing import Timing
from tests.e2e.harness import Delivery
from tests.engine.fake_exchange import Received

FIGURES: list[str] = []  # every line published in this pytest session

Occurrence = tuple[str, int]  # (schedule_id, scheduled_for epoch ms)
When = str | Timing  # a cron expression, or a schedule's timing of any kind (core.timing)


def planned(
    when: When, *, schedule_id: str, jitter_seconds: int, after_ms: int, timezone: str = "UTC"
) -> Iterator[PlannedOccurrence]:
    """The planner's occurrences of a cron expression (in ``timezone``) or of a timing."""
    if isinstance(when, str):
        return planned_occurrences(
            parse_cron(when, timezone),
            schedule_id=schedule_id,
            jitter_seconds=jitter_seconds,
            after_ms=after_ms,
        )
    return planned_timing(
        when, schedule_id=schedule_id, jitter_seconds=jitter_seconds, after_ms=after_ms
    )


def publish(scenario: str, **figures: object) -> str:
    """Print one line of figures and keep it for the run's summary."""
    line = f"[chaos] {scenario} " + " ".join(f"{k}={v}" for k, v in figures.items())
    print(line)
    FIGURES.append(line)
    return line


def expected_occurrences(
    schedule_id: str,
    cron: When,
    *,
    after_ms: int,
    until_ms: int,
    jitter_seconds: int = 0,
    timezone: str = "UTC",
) -> list[Occurrence]:
    """Every occurrence with ``after_ms < scheduled_for <= until_ms``."""
    found: list[Occurrence] = []
    for occurrence in planned(
        cron,
        schedule_id=schedule_id,
        jitter_seconds=jitter_seconds,
        after_ms=after_ms,
        timezone=timezone,
    ):
        if occurrence.scheduled_for > until_ms:
            return found
        found.append((schedule_id, occurrence.scheduled_for))
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    occurrences: int  # expected
    copies: int  # requests received for occurrences inside the window
    delivered: int
    lost: int
    dup_same_key: int
    dup_diff_key: int
    unexpected: int
    effects: int  # distinct keys received: what a deduplicating tenant applies
    lost_list: tuple[Occurrence, ...] = field(default=())
    bad_keys: tuple[Occurrence, ...] = field(default=())
    unexpected_list: tuple[Occurrence, ...] = field(default=())

    def as_dict(self) -> dict[str, int]:
        return {
            "occurrences": self.occurrences,
            "copies": self.copies,
            "delivered": self.delivered,
            "lost": self.lost,
            "dup_same_key": self.dup_same_key,
            "dup_diff_key": self.dup_diff_key,
            "unexpected": self.unexpected,
            "effects": self.effects,
        }


def classify(
    deliveries: Iterable[Delivery],
    expected: Iterable[Occurrence],
    *,
    schedules: Iterable[str] | None = None,
    until_ms: int | None = None,
) -> Figures:
    """Classify every copy of the given ``schedules`` (default: those in ``expected``)
    with ``scheduled_for <= until_ms`` (default: no bound) against ``expected``."""
    wanted = set(expected)
    watched = set(schedules) if schedules is not None else {sid for sid, _ in wanted}
    copies: dict[Occurrence, list[Delivery]] = {}
    for d in deliveries:
        occurrence = (d.schedule_id, parse_instant(d.scheduled_for))
        if d.schedule_id in watched and (until_ms is None or occurrence[1] <= until_ms):
            copies.setdefault(occurrence, []).append(d)
    bad_keys = tuple(sorted(o for o, ds in copies.items() if not _keys_agree(o, ds)))
    duplicated = [o for o, ds in copies.items() if len(ds) > 1]
    lost = tuple(sorted(wanted - copies.keys()))
    unexpected = tuple(sorted(copies.keys() - wanted))
    return Figures(
        occurrences=len(wanted),
        copies=sum(len(ds) for ds in copies.values()),
        delivered=len(wanted & copies.keys()),
        lost=len(lost),
        dup_same_key=sum(1 for o in duplicated if o not in bad_keys),
        dup_diff_key=len(bad_keys),
        unexpected=len(unexpected),
        effects=len({d.key for ds in copies.values() for d in ds}),
        lost_list=lost,
        bad_keys=bad_keys,
        unexpected_list=unexpected,
    )


def _keys_agree(occurrence: Occurrence, copies: Sequence[Delivery]) -> bool:
    schedule_id, scheduled_for = occurrence
    key = idempotency_key(schedule_id, format_scheduled_for(scheduled_for))
    return all(d.key == key for d in copies)


# --- the database ------------------------------------------------------------------------
# A SQLite file (its path) or a PostgreSQL database (its postgresql:// URL): every reader
# below takes either, through :func:`query`.
Target = Path | str


def open_readonly(path: Path) -> apsw.Connection:
    """A read-only connection beside a running appliance (WAL: it never blocks it)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    return conn


def query(path: Target, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
    """Rows of ``sql`` from a SQLite file, or from a PostgreSQL database (its URL: the
    statement goes through the store's dialect translator, in a read-only transaction)."""
    if isinstance(path, str):
        return _query_postgres(path, sql, params)
    conn = open_readonly(path)
    try:
        return [tuple(row) for row in conn.execute(sql, params)]
    finally:
        conn.close()


def _query_postgres(url: str, sql: str, params: Sequence[object]) -> list[tuple[object, ...]]:
    import psycopg

    from appliance.store.infra.postgres.connection import PgConnection, configure

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as raw:
        configure(raw)
        raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        rows = [tuple(row) for row in PgConnection(raw).execute(sql, params)]
        raw.execute("COMMIT")
        return rows


def duplicate_rows(path: Target) -> int:
    """Rows beyond the first for any occurrence (the unique index should make this 0)."""
    ((extra,),) = query(
        path,
        "SELECT COUNT(*) - (SELECT COUNT(*) FROM"
        " (SELECT DISTINCT schedule_id, scheduled_for FROM job_runs) AS occurrences)"
        " FROM job_runs",
    )
    assert isinstance(extra, int)
    return extra


def open_runs(path: Target) -> int:
    """Runs not finished yet (pending, running, retry_wait)."""
    ((count,),) = query(
        path, "SELECT COUNT(*) FROM job_runs WHERE state IN ('pending','running','retry_wait')"
    )
    assert isinstance(count, int)
    return count


def run_states(path: Target) -> dict[Occurrence, str]:
    rows = query(path, "SELECT schedule_id, scheduled_for, state FROM job_runs")
    return {(str(sid), int(str(sched))): str(state) for sid, sched, state in rows}


def all_succeeded(path: Target, expected: Iterable[Occurrence]) -> bool:
    """True once every expected occurrence has a ``succeeded`` run."""
    states = run_states(path)
    return all(states.get(o) == "succeeded" for o in expected)


def out_of_order_rows(path: Target) -> list[str]:
    """Schedule-triggered rows of one schedule must be inserted (rowid order) in strictly
    increasing ``scheduled_for``: the cursor never moves back, whatever the wall clock
    did. Returns the run ids that break it."""
    rows = query(
        path,
        "SELECT id, schedule_id, scheduled_for FROM job_runs WHERE trigger = 'schedule'"
        " ORDER BY rowid",
    )
    last: dict[object, int] = {}
    broken: list[str] = []
    for rid, sid, sched in rows:
        instant = int(str(sched))
        if sid in last and instant <= last[sid]:
            broken.append(str(rid))
        last[sid] = max(instant, last.get(sid, instant))
    return broken


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    run_id: str
    attempt: int
    lease_token: str
    incarnation_id: str
    started_at: int
    finished_at: int | None
    outcome: str | None
    reclaimed_at: int | None = None


def attempts(path: Target) -> dict[str, list[Attempt]]:
    rows = query(
        path,
        "SELECT run_id, attempt, lease_token, incarnation_id, started_at, finished_at, outcome,"
        " reclaimed_at FROM attempts ORDER BY run_id, attempt",
    )
    found: dict[str, list[Attempt]] = {}
    for rid, n, token, inc, started, finished, outcome, reclaimed in rows:
        found.setdefault(str(rid), []).append(
            Attempt(
                run_id=str(rid),
                attempt=int(str(n)),
                lease_token=str(token),
                incarnation_id=str(inc),
                started_at=int(str(started)),
                finished_at=None if finished is None else int(str(finished)),
                outcome=None if outcome is None else str(outcome),
                reclaimed_at=None if reclaimed is None else int(str(reclaimed)),
            )
        )
    return found


def _reclaim_instants(path: Target) -> dict[tuple[str, int], int]:
    """When each attempt's lease was taken back: the run event a reclaim wrote for it."""
    rows = query(
        path,
        "SELECT run_id, occurred_at, data FROM events WHERE run_id IS NOT NULL"
        " AND type IN ('schedule.run.retrying', 'schedule.run.failed')",
    )
    found: dict[tuple[str, int], int] = {}
    for rid, at, data in rows:
        attempt = json.loads(str(data)).get("attempt")
        if isinstance(attempt, int):
            found.setdefault((str(rid), attempt), int(str(at)))
    return found


FENCED = frozenset({"ok", "retryable", "permanent", "abandoned"})
TERMINAL_OUTCOMES = frozenset({"ok", "permanent"})


def lease_violations(path: Target) -> list[str]:
    """Overlapping leases and reopened runs, from the attempts table. Empty is good.

    Each attempt (one claim, one lease token) holds the run's lease from ``started_at``
    until its *release*:

    - ``ok``/``retryable``/``permanent`` — its fenced completion (``finished_at``): the
      fence proves the token was still the run's when it committed;
    - ``abandoned`` — the reclaim that took it back (``finished_at``);
    - ``stale`` — its completion was refused because a reclaim had already taken the lease
      back; the release is that reclaim's instant (its run event for this attempt number),
      not the late completion — and the row's ``reclaimed_at`` must say the same (as an
      ``abandoned`` row's must equal its ``finished_at``);
    - open (no outcome) — still held: it must be the run's last attempt.

    Two leases of one run overlap when attempt *k+1* started before attempt *k* was
    released. A run is *reopened* when an attempt follows one that ended it (``ok`` or
    ``permanent``): the chaos scenarios never replay, so that must not happen. Instants are
    wall-clock ms of one machine: not meaningful across wall-clock jumps.
    """
    reclaimed = _reclaim_instants(path)
    problems: list[str] = []
    for rid, chain in attempts(path).items():
        for before, after in itertools.pairwise(chain):
            if before.outcome is None:
                problems.append(f"{rid}: attempt {before.attempt} still open under a later one")
                continue
            if before.outcome in TERMINAL_OUTCOMES:
                problems.append(f"{rid}: attempt {after.attempt} reopened a finished run")
            released = _release(before, reclaimed)
            if released is None:
                problems.append(f"{rid}: stale attempt {before.attempt} has no reclaim")
            elif after.started_at < released:
                problems.append(
                    f"{rid}: attempt {after.attempt} started at {after.started_at}, before"
                    f" attempt {before.attempt} was released at {released}"
                )
        problems += [
            f"{rid}: attempt {a.attempt} released before it started"
            for a in chain
            if a.outcome in FENCED and a.finished_at is not None and a.finished_at < a.started_at
        ]
        problems += [  # the row keeps the reclaim's instant, whatever came after it
            f"{rid}: {a.outcome} attempt {a.attempt} lost its reclaim instant"
            for a in chain
            if a.outcome in ("abandoned", "stale")
            and a.reclaimed_at
            != (a.finished_at if a.outcome == "abandoned" else _release(a, reclaimed))
        ]
    return problems


def _release(attempt: Attempt, reclaimed: dict[tuple[str, int], int]) -> int | None:
    if attempt.outcome == "stale":
        return reclaimed.get((attempt.run_id, attempt.attempt))
    return attempt.finished_at


def outcome_counts(path: Target) -> dict[str, int]:
    rows = query(path, "SELECT COALESCE(outcome, 'open'), COUNT(*) FROM attempts GROUP BY 1")
    return {str(outcome): int(str(n)) for outcome, n in rows}


def event_types(path: Target) -> dict[str, int]:
    rows = query(path, "SELECT type, COUNT(*) FROM events GROUP BY type")
    return {str(t): int(str(n)) for t, n in rows}


def delivery_from_request(request: Received, *, arrived: float) -> Delivery:
    """A copy as the recorder books it, from an ``Received`` request seen in process."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    return Delivery(
        key=headers["x-idempotency-key"],
        attempt=int(headers["x-attempt"]),
        scheduled_for=headers["x-scheduled-for"],
        run_id=headers["x-run-id"],
        schedule_id=headers["x-schedule-id"],
        headers=headers,
        body=request.content,
        arrived=arrived,
    )


MISFIRE_MS = 60_000  # PlannerConfig.misfire_ms: later than this when planned is a misfire


def catchup_violations(
    path: Target,
    *,
    schedule_id: str,
    cron: When,
    policy: str,
    window_ms: int,
    jitter_seconds: int = 0,
) -> list[str]:
    """Each schedule-triggered row must be ``missed`` exactly when the catch-up policy says
    so at the instant it was planned (its ``created_at``), restated here from ADR 0033:
    on time (≤ 60 s late) → delivered; older than the window → missed; inside it: ``all``
    delivers, ``skip`` misses, ``latest`` delivers only if the next occurrence is not a
    misfire too. And every missed row is told by a ``schedule.run.missed`` event (one per
    row, or summaries whose counts add up). Empty is good."""
    rows = query(
        path,
        "SELECT scheduled_for, due_at, created_at, state FROM job_runs"
        " WHERE schedule_id = ? AND trigger = 'schedule' ORDER BY scheduled_for",
        (schedule_id,),
    )
    problems: list[str] = []
    missed = 0
    for sched, due, planned_at, state in rows:
        following = _following_due_at(cron, schedule_id, jitter_seconds, int(str(sched)))
        should_miss = _should_miss(
            int(str(planned_at)) - int(str(due)),
            None if following is None else int(str(planned_at)) - following,
            policy=policy,
            window_ms=window_ms,
        )
        missed += state == "missed"
        if should_miss != (state == "missed"):
            when = format_scheduled_for(int(str(sched)))
            problems.append(f"{schedule_id} {when}: {state}, policy {policy} says otherwise")
    told = _missed_told(path, schedule_id)
    if told != missed:
        problems.append(f"{schedule_id}: {missed} missed rows but events tell of {told}")
    return problems


def _should_miss(lateness: int, next_lateness: int | None, *, policy: str, window_ms: int) -> bool:
    if lateness <= MISFIRE_MS:
        return False
    if lateness > window_ms:
        return True
    if policy == "all":
        return False
    if policy == "skip":
        return True
    return next_lateness is not None and next_lateness > MISFIRE_MS


def _following_due_at(cron: When, schedule_id: str, jitter_seconds: int, after: int) -> int | None:
    stream = planned(cron, schedule_id=schedule_id, jitter_seconds=jitter_seconds, after_ms=after)
    following = next(stream, None)
    return None if following is None else following.due_at


def _missed_told(path: Target, schedule_id: str) -> int:
    rows = query(
        path,
        "SELECT run_id, data FROM events WHERE type = 'schedule.run.missed' AND schedule_id = ?",
        (schedule_id,),
    )
    return sum(1 if rid is not None else int(json.loads(str(data))["count"]) for rid, data in rows)
