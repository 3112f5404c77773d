"""Claims and heartbeats: an attempt's life under its lease (ADR 0033).

An incarnation is one process start. It claims due runs under leases, renews them with
heartbeats and completes them fenced on their lease token
(:mod:`appliance.store.completions`). Taking runs back from a dead or stuck executor is
:mod:`appliance.store.usecases.reclaim`.

Rules this module guards:

- **Claim** is one ``UPDATE … WHERE id IN (SELECT …) RETURNING``: two claimers can never
  both hold a run, because the second statement no longer sees it as claimable. Each row
  gets its own random lease token (each store's random function is evaluated per row).
- **Fair between tenants.** The claim shares the free slots between the tenants with due
  runs in turns: each tenant's due runs are ranked earliest first, a run's *turn* is its
  rank plus the runs its tenant already has ``running``, and the claim takes the lowest
  turns (earliest ``due_at`` within a turn). So a tenant with a backlog gets one slot
  per turn like everyone else, and one already holding many slots goes last. A tenant
  never holds more than ``tenant_cap`` running runs: slow receivers of one tenant cannot
  take every delivery slot from the others. The claim finds the tenants with claimable
  runs by a skip scan of ``job_runs_claimable_tenant`` and reads at most ``limit`` due
  runs of each tenant below its cap through the same index, so its cost follows the
  slots it fills and the tenants waiting, not the backlog. When one tenant alone has
  claimable runs (the common case, and every burst), the turns are just its due runs in
  order, and the claim is the same ``UPDATE`` over one range read of that index.
- **Isolation** (PostgreSQL): the claim and the heartbeat run ``READ COMMITTED``
  (docs/adr/0044-postgresql-store.md): the claim locks its waiting tenants' rows first,
  so replicas claiming for one tenant take turns and the cap holds between them.
- One batched query reads every claimed run's details, one statement inserts their
  ``attempts`` rows, one query reads their tenants' signing secrets. On PostgreSQL the
  claim, the insert and the details are one statement (a data-modifying ``WITH``).
- **Heartbeat**: one ``UPDATE`` renews every unexpired running row of an incarnation.
  An expired lease is the reaper's, never silently revived.
- **Fencing**: every write that moves a run out of ``running`` says ``AND lease_token =
  ? AND state = 'running'`` (:mod:`appliance.store.completions`, the reclaim).
- **Overlap** (docs/schedules.md): before it claims, the claim lets
  :func:`appliance.store.usecases.overlap.gate_overlaps` skip or hold the due runs of schedules
  whose ``overlap`` is not ``allow``, in the same transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Final

from appliance.core.retry import RetryBudget, RetryPolicy
from appliance.core.retry_input import stored_policy
from appliance.core.runs import RunState, Transition, check_transition
from appliance.core.schedules import Method
from appliance.store.active_secrets import active_secrets_of
from appliance.store.infra import rows
from appliance.store.infra.connection import (
    ROW_LOCKS,
    Connection,
    Sql,
    on_sqlite,
    read_committed,
)
from appliance.store.runs import ATTEMPTED_RUN_SQL, CLAIMABLE_SQL, RUNNING_SQL
from appliance.store.usecases.overlap import gate_overlaps


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedRun:
    """Everything one attempt needs, read in the claim's transaction."""

    run_id: str
    tenant_id: str
    schedule_id: str
    scheduled_for: int
    idempotency_key: str
    attempt: int  # 1-based number of this attempt
    budget: RetryBudget
    lease_token: str
    lease_expires_at: int
    target_url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    content_type: str
    timeout_seconds: int
    retry: RetryPolicy  # the schedule's, read with the run (core.retry_input)
    secrets: tuple[str, ...]  # the tenant's active signing secrets, newest first
    resend_of: str | None  # a resend copy: the run it copies (X-Steeple-Resend)
    method: Method  # the schedule's, now (like its URL and headers)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimBatch:
    runs: tuple[ClaimedRun, ...]
    # Earliest due_at still claimable after this claim, among tenants below their cap
    # (a capped tenant's runs wait for one of its slots, not for time).
    next_due_at: int | None
    capped: frozenset[str]  # tenants left with due runs because they hold their cap


# Tenants with a claimable run: a skip scan, one index seek per tenant. Each waiting
# tenant's running runs are counted through ``job_runs_tenant_state_time`` (tenant,
# state), one seek per tenant, grouped so that the count is made once per tenant (a
# correlated count was made again for every candidate row of the turns). A count grouped
# over every tenant's running runs was planned as a scan of that whole index (twice per
# claim, growing with the table; bench/HISTORY.md, "CPU per delivery, round two").
_WAITING_TENANTS = (
    "WITH RECURSIVE waiting(tenant_id) AS ("
    f" SELECT MIN(tenant_id) FROM job_runs WHERE state IN {CLAIMABLE_SQL}"
    " UNION ALL SELECT (SELECT MIN(tenant_id) FROM job_runs"
    f" WHERE state IN {CLAIMABLE_SQL} AND tenant_id > waiting.tenant_id)"
    " FROM waiting WHERE waiting.tenant_id IS NOT NULL)"
)


def _tenants(only: str = "") -> str:
    """The waiting tenants and their running counts; ``only`` narrows them (a condition
    on ``w.tenant_id``)."""
    return (
        f"{_WAITING_TENANTS}, room(tenant_id, running) AS (SELECT w.tenant_id, COUNT(b.id)"
        f" FROM waiting w LEFT JOIN job_runs b ON b.tenant_id = w.tenant_id"
        f" AND b.state = {RUNNING_SQL} WHERE w.tenant_id IS NOT NULL{only} GROUP BY w.tenant_id)"
    )


_TENANTS: Final = _tenants()
# PostgreSQL, under READ COMMITTED: the claim first locks the rows of the tenants with
# claimable runs, in id order, so that two replicas claiming for one tenant take turns
# and each counts the other's committed claims against the tenant's cap; its turns are
# then drawn from the tenants it locked alone (a tenant that began waiting since waits
# for the next claim).
_LOCK_TENANTS: Final = (
    f"{_WAITING_TENANTS} SELECT t.id FROM tenants t"
    " WHERE t.id IN (SELECT tenant_id FROM waiting) ORDER BY t.id FOR UPDATE OF t"
)
_LOCKED_ONLY: Final = (
    " AND w.tenant_id IN (SELECT value FROM json_array_elements_text(CAST(:locked AS json)))"
)

# 32 random hex digits, made per row by each store's own random function.
_NEW_LEASE_TOKEN: Final = Sql(
    sqlite="lower(hex(randomblob(16)))",
    postgres="replace(CAST(gen_random_uuid() AS text), '-', '')",
)


def _set_claimed(token: str) -> str:
    return (
        "UPDATE job_runs SET"
        f" state = '{check_transition(RunState.PENDING, Transition.CLAIM).value}',"
        f" attempt = attempt + 1, lease_owner = :owner, lease_token = {token},"
        " lease_expires_at = :expires, heartbeat_at = :now, updated_at = :now"
    )


def _claim_statements(
    locks: str, token: str, tenants: str, returning: str = "id"
) -> tuple[str, str]:
    """The contested claim and a lone tenant's, their picks ending with ``locks``
    (:func:`~appliance.store.infra.connection.row_locks`), the lease tokens ``token``, the
    contested claim's tenants ``tenants`` (a :func:`_tenants`), returning ``returning``
    of each claimed run."""
    # Tenants take turns: a run's turn is its rank among its tenant's due runs plus the runs
    # its tenant has running. At most :limit due runs are read per tenant below its cap.
    contested = (
        f"{tenants}, turns(id, due_at, turn) AS (SELECT r.id, r.due_at,"
        " t.running + ROW_NUMBER() OVER (PARTITION BY t.tenant_id ORDER BY r.due_at)"
        " FROM room t JOIN job_runs r ON r.rowid IN (SELECT rowid FROM job_runs"
        f" WHERE tenant_id = t.tenant_id AND state IN {CLAIMABLE_SQL} AND due_at <= :now"
        f" ORDER BY due_at LIMIT :limit{locks}) WHERE t.running < :cap)"
        f" {_set_claimed(token)}"
        " WHERE id IN (SELECT id FROM turns WHERE turn <= :cap ORDER BY turn, due_at LIMIT :limit)"
        f" RETURNING {returning}"
    )
    # When one tenant alone has claimable runs, its turns are its due runs in due_at order,
    # so the pick is one range read of its index (:limit within its cap).
    alone = (
        f"{_set_claimed(token)} WHERE id IN (SELECT id FROM job_runs WHERE tenant_id = :tenant"
        f" AND state IN {CLAIMABLE_SQL} AND due_at <= :now ORDER BY due_at LIMIT :limit"
        f"{locks}) RETURNING {returning}"
    )
    return contested, alone


_SQLITE_CLAIMS: Final = _claim_statements(ROW_LOCKS.sqlite, _NEW_LEASE_TOKEN.sqlite, _TENANTS)
# PostgreSQL claims, inserts the attempts and reads the details in one statement
# (:data:`_CLAIMED`): its claim returns whole rows.
_POSTGRES_CLAIMS: Final = _claim_statements(
    ROW_LOCKS.postgres, _NEW_LEASE_TOKEN.postgres, _tenants(_LOCKED_ONLY), returning="*"
)
_CLAIM: Final = Sql(sqlite=_SQLITE_CLAIMS[0], postgres=_POSTGRES_CLAIMS[0])
_CLAIM_ALONE: Final = Sql(sqlite=_SQLITE_CLAIMS[1], postgres=_POSTGRES_CLAIMS[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class _Waiting:
    """A tenant with claimable runs, after the claim."""

    tenant_id: str
    running: int
    due_at: int  # its earliest claimable due_at


_WAITING_COLUMNS: Final = rows.Columns(
    _Waiting,
    ["tenant_id", "running", "due_at"],
    sql={
        "due_at": "(SELECT MIN(due_at) FROM job_runs WHERE tenant_id = room.tenant_id"
        f" AND state IN {CLAIMABLE_SQL})"
    },
)
_WAITING: Final = f"{_TENANTS} SELECT {_WAITING_COLUMNS.select} FROM room"


def _claimed(
    *,
    budget_base: int,
    budget_from: int,
    max_attempts: int,
    retry_policy: str | None,
    **fields: Any,
) -> ClaimedRun:
    budget = RetryBudget(attempt_base=budget_base, window_start=budget_from)
    retry = stored_policy(max_attempts, retry_policy)
    return ClaimedRun(budget=budget, retry=retry, secrets=(), **fields)  # secrets: next


_DETAILS: Final = rows.Columns(
    _claimed,
    [
        "run_id",
        "tenant_id",
        "schedule_id",
        "scheduled_for",
        "idempotency_key",
        "attempt",
        "budget_base",
        "budget_from",
        "lease_token",
        "lease_expires_at",
        "target_url",
        "headers",
        "body",
        "content_type",
        "timeout_seconds",
        "max_attempts",
        "retry_policy",
        "resend_of",
        "method",
    ],
    table="r",
    sql={
        **ATTEMPTED_RUN_SQL,
        "target_url": "s.target_url",
        "method": "s.method",
        "headers": "s.headers",
        "body": "b.body",
        "content_type": "b.content_type",
        "timeout_seconds": "s.timeout_seconds",
        "max_attempts": "s.max_attempts",
        "retry_policy": "s.retry_policy",
    },
    convert={"headers": rows.headers, "body": rows.blob, "method": rows.enum_of(Method)},
)
# The claimed ids arrive as one JSON array: one statement whatever their number.
_CLAIMED_IDS: Final = Sql(
    sqlite="(SELECT value FROM json_each(:ids))",
    postgres="(SELECT value FROM json_array_elements_text(CAST(:ids AS json)))",
)
_NO_CAP: Final = 1 << 62


@read_committed
def claim_runs(
    conn: Connection,
    *,
    owner: str,
    now: int,
    lease_ms: int,
    limit: int,
    tenant_cap: int | None = None,
) -> ClaimBatch:
    """Claim up to ``limit`` due runs for incarnation ``owner``, shared fairly between
    tenants, none beyond ``tenant_cap`` running runs per tenant (None: no cap).

    ``READ COMMITTED`` on PostgreSQL: the waiting tenants' rows are locked first
    (:data:`_LOCK_TENANTS`, the cap and the overlap gate), the picked runs are locked
    ``SKIP LOCKED`` and checked again against the pick's conditions as they are locked."""
    locked = None if on_sqlite(conn) else {tid for (tid,) in conn.execute(_LOCK_TENANTS)}
    gate_overlaps(conn, now=now)  # skip or hold what overlaps an open run first
    cap = _NO_CAP if tenant_cap is None else tenant_cap
    params: dict[str, object] = {
        "owner": owner, "now": now, "expires": now + lease_ms, "limit": limit, "cap": cap,
    }  # fmt: skip
    if locked is not None:
        params["locked"] = json.dumps(sorted(locked))
    # Two tenants at most: enough to tell a contested claim from a lone tenant's.
    waiting = _WAITING_COLUMNS.all(conn.execute(f"{_WAITING} LIMIT 2")) if limit > 0 else []
    claim: Sql | None = _CLAIM if waiting else None
    if len(waiting) == 1:
        (alone,) = waiting
        unlocked = locked is not None and alone.tenant_id not in locked
        room = 0 if unlocked else min(limit, cap - alone.running)
        params.update(tenant=alone.tenant_id, limit=room)
        claim = _CLAIM_ALONE if room > 0 else None
    claimed = () if claim is None else _claim(conn, claim, params, owner=owner, now=now)
    next_due_at, capped = _waiting(conn, now=now, cap=cap)
    return ClaimBatch(runs=claimed, next_due_at=next_due_at, capped=capped)


def _claim(
    conn: Connection, claim: Sql, params: dict[str, object], *, owner: str, now: int
) -> tuple[ClaimedRun, ...]:
    """The runs ``claim`` claims, with what their attempts need; their ``attempts`` rows
    inserted. SQLite: the claim, then :func:`_details`. PostgreSQL: one statement, whose
    claim is a data-modifying ``WITH`` that the insert and the details read (they see the
    claimed rows as the claim left them), then the secrets."""
    if on_sqlite(conn):
        ids = [rid for (rid,) in conn.execute(claim.sqlite, params)]
        return _details(conn, owner=owner, ids=ids, now=now) if ids else ()
    runs = _DETAILS.all(conn.execute(_CLAIMED.format(claim=claim.postgres), params))
    return _with_secrets(conn, runs, now=now)


_CLAIMED: Final = (
    "WITH r AS ({claim}), started AS (INSERT INTO attempts"
    " (run_id, attempt, lease_token, incarnation_id, started_at)"
    " SELECT id, attempt, lease_token, :owner, :now FROM r)"
    f" SELECT {_DETAILS.select} FROM r JOIN schedules s ON s.id = r.schedule_id"
    " JOIN bodies b ON b.digest = r.body_digest ORDER BY r.scheduled_for, r.id"
)


def _details(conn: Connection, *, owner: str, ids: list[str], now: int) -> tuple[ClaimedRun, ...]:
    """The claimed runs with what their attempts need, and their ``attempts`` rows."""
    batch = {"ids": json.dumps(ids), "owner": owner, "now": now}
    conn.execute(
        "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id, started_at)"
        f" SELECT id, attempt, lease_token, :owner, :now FROM job_runs"
        f" WHERE id IN {_CLAIMED_IDS.on(conn)}",
        batch,
    )
    runs = _DETAILS.all(
        conn.execute(
            f"SELECT {_DETAILS.select} FROM job_runs r JOIN schedules s ON s.id = r.schedule_id"
            f" JOIN bodies b ON b.digest = r.body_digest WHERE r.id IN {_CLAIMED_IDS.on(conn)}"
            " ORDER BY r.scheduled_for, r.id",
            {"ids": batch["ids"]},
        )
    )
    return _with_secrets(conn, runs, now=now)


def _with_secrets(conn: Connection, runs: list[ClaimedRun], *, now: int) -> tuple[ClaimedRun, ...]:
    secrets = active_secrets_of(conn, tenant_ids={run.tenant_id for run in runs}, now=now)
    return tuple(replace(run, secrets=secrets.get(run.tenant_id, ())) for run in runs)


def _waiting(conn: Connection, *, now: int, cap: int) -> tuple[int | None, frozenset[str]]:
    earliest: int | None = None
    capped: set[str] = set()
    for tenant in _WAITING_COLUMNS.all(conn.execute(_WAITING)):
        if tenant.running >= cap:
            if tenant.due_at <= now:
                capped.add(tenant.tenant_id)
        elif earliest is None or tenant.due_at < earliest:
            earliest = tenant.due_at
    return earliest, frozenset(capped)


@read_committed
def renew_leases(conn: Connection, *, owner: str, now: int, lease_ms: int) -> frozenset[str]:
    """The heartbeat: extend every unexpired lease ``owner`` holds to ``now + lease_ms``.
    Returns the lease tokens renewed: a delivery whose token is missing has lost its lease
    (expired, reclaimed, or completed) and must stop. ``READ COMMITTED``: one ``UPDATE``,
    whose conditions PostgreSQL checks again on a row another transaction changed."""
    renewed = conn.execute(
        "UPDATE job_runs SET lease_expires_at = ?, heartbeat_at = ?"
        f" WHERE lease_owner = ? AND state = {RUNNING_SQL} AND lease_expires_at >= ?"
        " RETURNING lease_token",
        (now + lease_ms, now, owner, now),
    )
    return frozenset(token for (token,) in renewed)
