"""Fixtures for store tests: a tenant and schedule rows written with plain SQL.

Every test that takes ``db`` runs twice: on a SQLite file and on a PostgreSQL database
(the store contract: the same functions, the same results; docs/adr/0044-postgresql-store.md).
A module that tests one store only (the SQLite file, its pragmas) defines its own ``db``.

Schedules are inserted directly (not through ``store.schedules``) so the run, planning and
lease queries are tested against the schema alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.core.ids import new_id
from appliance.core.instants import parse_instant
from appliance.core.runs import RunState, Trigger, occurrence_run
from appliance.store.infra.backend import Store
from appliance.store.infra.connection import Connection
from appliance.store.infra.database import Database
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.materialise import insert_runs, store_body
from appliance.store.tenants import create_tenant

T0 = parse_instant("2026-08-06T03:00:00Z")


@dataclass(frozen=True, kw_only=True)
class ScheduleRow:
    cron: str = "* * * * *"
    timezone: str = "UTC"
    target_url: str = "https://tenant.example/hook"
    body: bytes = b'{"n":1}'
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = (("X-Team", "billing"),)
    jitter_seconds: int = 0
    catchup_policy: str = "all"
    catchup_window_seconds: int = 3600
    max_attempts: int = 8
    timeout_seconds: int = 30
    paused: bool = False
    next_fire_at: int | None = T0
    deleted_at: int | None = None
    at: int | None = None  # another kind than cron (docs/schedules.md): cron is then ''
    every_seconds: int | None = None
    start_at: int | None = None
    end_at: int | None = None
    overlap: str = "allow"


def insert_schedule(conn: Connection, *, tenant_id: str, row: ScheduleRow, now: int) -> str:
    schedule_id = new_id("sch", now)
    conn.execute(
        "INSERT INTO schedules (id, tenant_id, name, cron, timezone, target_url, payload_kind,"
        " body, content_type, headers, jitter_seconds, catchup_policy, catchup_window_seconds,"
        " max_attempts, timeout_seconds, paused, next_fire_at, created_at, updated_at,"
        " deleted_at, at, every_seconds, start_at, end_at, overlap)"
        " VALUES (?, ?, 'test', ?, ?, ?, 'json', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
        " ?, ?, ?, ?, ?)",
        (
            schedule_id,
            tenant_id,
            row.cron,
            row.timezone,
            row.target_url,
            row.body,
            row.content_type,
            json.dumps([list(pair) for pair in row.headers]),
            row.jitter_seconds,
            row.catchup_policy,
            row.catchup_window_seconds,
            row.max_attempts,
            row.timeout_seconds,
            int(row.paused),
            row.next_fire_at,
            now,
            now,
            row.deleted_at,
            row.at,
            row.every_seconds,
            row.start_at,
            row.end_at,
            row.overlap,
        ),
    )
    return schedule_id


# A test of SQLite itself (its query plans): its ``db`` is the SQLite store alone.
SQLITE_ONLY = pytest.mark.parametrize("db", ["sqlite"], indirect=True)
STORES = [
    "sqlite",
    pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.postgres_twin]),
]


@pytest.fixture(params=STORES)
def db(request: pytest.FixtureRequest, fresh_sqlite: Path) -> Iterator[Store]:
    """A migrated store of each kind, threaded like production."""
    store: Store
    if request.param == "sqlite":
        store = Database.open(fresh_sqlite)
    else:
        store = PgDatabase.open(request.getfixturevalue("pg_store_dsn"))
    yield store
    store.close()


@pytest.fixture
def tenant(db: Database) -> str:
    return db.write_now(create_tenant, name="acme", now=T0).tenant_id


MakeSchedule = Callable[..., str]


@pytest.fixture
def make_schedule(db: Database, tenant: str) -> MakeSchedule:
    """``make_schedule(cron=..., next_fire_at=...)`` inserts a schedule; returns its id."""

    def make(**fields: object) -> str:
        row = ScheduleRow(**fields)  # type: ignore[arg-type]
        return db.write_now(insert_schedule, tenant_id=tenant, row=row, now=T0)

    return make


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Any]:
    """An autocommit psycopg connection to this test's fresh PostgreSQL database."""
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def lite() -> Iterator[apsw.Connection]:
    """An empty in-memory SQLite database, foreign keys on as the store has them."""
    conn = apsw.Connection(":memory:")
    conn.execute("PRAGMA foreign_keys=ON")
    yield conn
    conn.close()


def add_due(db: Store, tenant: str, schedule: str, *, count: int, first_due: int) -> None:
    """``count`` pending runs of ``schedule``, one a second from ``first_due``."""

    def insert(conn: Connection) -> None:
        digest = store_body(conn, content_type="application/json", body=b"{}")
        runs = [
            occurrence_run(
                schedule_id=schedule,
                tenant_id=tenant,
                schedule_version=1,
                scheduled_for=first_due + k * 1_000,
                due_at=first_due + k * 1_000,
                state=RunState.PENDING,
                trigger=Trigger.SCHEDULE,
                body_digest=digest,
            )
            for k in range(count)
        ]
        assert len(insert_runs(conn, runs, now=T0)) == count

    db.write_now(insert)
