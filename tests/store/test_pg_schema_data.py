"""The PostgreSQL schema (appliance/store/infra/postgres/migrations) behaves as SQLite's where
the store relies on it: text sorts bytewise, tenant names are unique ignoring ASCII case,
rowids count up in insertion order, 0019's backfill finds the same instants, and every
upsert's conflict target has its unique index. Statements run on both stores and their
answers are compared."""

from __future__ import annotations

from typing import Any

import apsw
import pytest

from appliance.store.infra.migrate import migrate
from tests.store.schema_shapes import PG_FILES, pg_apply, sqlite_at

try:
    import psycopg
except ImportError:  # the pg_cluster fixture skips these tests, naming what is missing
    psycopg = None


def _both(pg: Any, lite: apsw.Connection, sql: str, *args: Any) -> list[list[tuple[Any, ...]]]:
    """Run one statement on both databases; each one's rows (or its error's class name)."""
    results = []
    try:
        cursor = pg.execute(sql.replace("?", "%s"), args)
        results.append([tuple(row) for row in cursor.fetchall()] if cursor.description else [])
    except psycopg.IntegrityError:
        results.append([("error", "constraint")])
    try:
        results.append([tuple(row) for row in lite.execute(sql, args)])
    except apsw.ConstraintError:
        results.append([("error", "constraint")])
    return results


def test_text_sorts_bytewise_and_tenant_names_are_unique_ignoring_ascii_case(
    pg: Any, lite: apsw.Connection
) -> None:
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    migrate(lite)
    insert = "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)"
    names = ["b", "é", "Z", "_", "A", "ÉCOLE", "école"]  # NOCASE folds ASCII only
    for n, name in enumerate(names):
        pg_rows, lite_rows = _both(pg, lite, insert, f"ten_{n}", name)
        assert pg_rows == lite_rows == []
    assert _both(pg, lite, insert, "ten_acme", "acme") == [[], []]
    clash = [("error", "constraint")]
    assert _both(pg, lite, insert, "ten_ACME", "ACME") == [clash, clash]
    pg_rows, lite_rows = _both(pg, lite, "SELECT name FROM tenants ORDER BY name")
    assert pg_rows == lite_rows
    expected = sorted([*names, "acme"], key=lambda s: s.encode())
    assert [name for (name,) in pg_rows] == expected


def test_rowids_and_identities_count_up_in_insertion_order(pg: Any) -> None:
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    pg.execute("INSERT INTO tenants (id, name, created_at) VALUES ('ten_1', 'acme', 0)")
    for key_id in ("key_c", "key_a", "key_b"):  # ids out of order: rowid follows inserts
        pg.execute(
            "INSERT INTO api_keys (id, tenant_id, key_hash, created_at)"
            " VALUES (%s, 'ten_1', %s, 5)",
            (key_id, key_id),
        )
    rows = pg.execute("SELECT id FROM api_keys ORDER BY created_at, rowid").fetchall()
    assert [key_id for (key_id,) in rows] == ["key_c", "key_a", "key_b"]
    for n in range(2):
        pg.execute(
            "INSERT INTO events (id, tenant_id, type, occurred_at, data)"
            " VALUES (%s, 'ten_1', 'x', 0, '{}') RETURNING seq",
            (f"evt_{n}",),
        )
    seqs = [seq for (seq,) in pg.execute("SELECT seq FROM events ORDER BY id")]
    assert seqs == sorted(seqs) and len(set(seqs)) == 2


_SEED = [
    "INSERT INTO tenants (id, name, created_at) VALUES ('ten_1', 'acme', 0)",
    "INSERT INTO schedules (id, tenant_id, name, cron, timezone, target_url, payload_kind,"
    " body, content_type, headers, jitter_seconds, catchup_policy, catchup_window_seconds,"
    " max_attempts, timeout_seconds, created_at, updated_at) VALUES ('sch_1', 'ten_1', 'n',"
    " '* * * * *', 'UTC', 'https://x.example/', 'json', ?, 'application/json', '[]',"
    " 0, 'all', 60, 5, 30, 0, 0)",
    "INSERT INTO bodies (digest, content_type, body) VALUES ('d', 'application/json', ?)",
    "INSERT INTO job_runs (id, tenant_id, schedule_id, schedule_version, scheduled_for,"
    " idempotency_key, due_at, state, body_digest, created_at, updated_at)"
    " VALUES ('run_1', 'ten_1', 'sch_1', 1, 0, 'k', 0, 'failed', 'd', 0, 0)",
]
# (attempt, started_at, finished_at, outcome)
_ATTEMPTS = [(1, 10, 100, "abandoned"), (2, 200, 900, "stale"), (3, 300, 950, "stale")]
_ATTEMPTS += [(4, 400, 960, "ok"), (5, 500, 970, "stale"), (6, 600, 980, "stale")]
# (occurred_at, type, attempt as JSON text)
_EVENTS = [
    (150, "schedule.run.retrying", "2"),  # before attempt 2 started: not its reclaim
    (240, "schedule.run.failed", "2"),  # the first after it started: its reclaim
    (250, "schedule.run.retrying", "2"),
    (230, "schedule.paused", "2"),  # not a run event
    (310, "schedule.run.retrying", '"3"'),  # SQLite's numeric affinity: "3" is 3
    (305, "schedule.run.retrying", '"3x"'),  # but "3x" is not
    (550, "schedule.run.cancelled", "5.0"),  # 5.0 is the number 5, in both
    (650, "schedule.run.failed", '"six"'),  # not a number at all
]


def test_0019_backfills_reclaimed_at_as_sqlite_does(pg: Any, lite: apsw.Connection) -> None:
    last = next(i + 1 for i, (name, _) in enumerate(PG_FILES) if "reclaimed_at" in name)
    for _, sql in PG_FILES[: last - 1]:
        pg_apply(pg, sql)
    sqlite_at(lite, last - 1)
    statements = [(sql, (b"{}",) if "?" in sql else ()) for sql in _SEED]
    statements += [
        (
            "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id, started_at,"
            " finished_at, outcome) VALUES ('run_1', ?, 't', 'inc_1', ?, ?, ?)",
            attempt,
        )
        for attempt in _ATTEMPTS
    ]
    statements += [
        (
            "INSERT INTO events (id, tenant_id, type, schedule_id, run_id, occurred_at, data)"
            " VALUES (?, 'ten_1', ?, 'sch_1', 'run_1', ?, ?)",
            (f"evt_{n}", kind, at, '{"attempt": ' + attempt + "}"),
        )
        for n, (at, kind, attempt) in enumerate(_EVENTS)
    ]
    for sql, args in statements:
        assert _both(pg, lite, sql, *args) == [[], []]
    pg_apply(pg, PG_FILES[last - 1][1])
    sqlite_at(lite, last)
    pg_rows, lite_rows = _both(
        pg, lite, "SELECT attempt, reclaimed_at FROM attempts ORDER BY attempt"
    )
    assert (
        pg_rows
        == lite_rows
        == [
            (1, 100),
            (2, 240),
            (3, 310),
            (4, None),
            (5, 550),
            (6, None),
        ]
    )


# The store's upserts name these conflict targets (store/materialise.py, store/usecases/backfill.py,
# store/notifications.py, store/request_keys.py, bodies' INSERT OR IGNORE): PostgreSQL wants
# a unique index on exactly those columns, and refuses the statement when planning it.
CONFLICT_TARGETS = [
    ("job_runs", ("schedule_id", "scheduled_for")),
    ("bodies", ("digest",)),
    ("notification_targets", ("tenant_id",)),
    ("notifications", ("event_seq", "url")),
    ("request_keys", ("tenant_id", "key")),
]


def _explain_upsert(pg: Any, table: str, columns: tuple[str, ...]) -> None:
    names = ", ".join(columns)
    values = ", ".join(["NULL"] * len(columns))
    pg.execute(
        f"EXPLAIN INSERT INTO {table} ({names}) VALUES ({values}) ON CONFLICT ({names}) DO NOTHING"
    )


def test_the_store_s_conflict_targets_have_their_unique_index(pg: Any) -> None:
    for _, sql in PG_FILES:
        pg_apply(pg, sql)
    for table, columns in CONFLICT_TARGETS:
        _explain_upsert(pg, table, columns)
    with pytest.raises(psycopg.errors.InvalidColumnReference):  # what a missing one does
        _explain_upsert(pg, "bodies", ("content_type",))
