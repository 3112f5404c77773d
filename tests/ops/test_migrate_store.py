"""``steeple migrate-store``: a real appliance's SQLite database, copied into PostgreSQL,
reads the same through the store functions — and a refused or failed copy writes nothing.

The source is made by a real appliance (tenants and a schedule of each kind over the API,
deliveries to a loopback receiver, then SIGTERM), plus users, sessions, a rotated secret,
a revoked key and a notification written with the store functions on the stopped file.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import psycopg
import pytest

from appliance.cli.main import main
from appliance.core.events import Actor, EventType
from appliance.core.instants import format_instant
from appliance.errors import DatabaseLocked, StoreError
from appliance.ops.migrate_store import migrate_store
from appliance.store.active_secrets import active_secrets
from appliance.store.api_keys import Scope, caller_for_api_key, issue_api_key, revoke_api_key
from appliance.store.events import append_event, list_events
from appliance.store.infra.backend import Store
from appliance.store.infra.database import Database
from appliance.store.infra.lockfile import LockFile
from appliance.store.infra.migrate import migrations
from appliance.store.infra.postgres import transfer
from appliance.store.infra.postgres.database import PgDatabase
from appliance.store.notifications import list_notifications, set_target
from appliance.store.runs import list_attempts, list_runs
from appliance.store.schedules import list_schedules
from appliance.store.sessions import find_session, reserve_attempt, start_session, throttled
from appliance.store.tenants import list_tenants, rotate_signing_secret
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.users import Role, create_user, user_by_email
from tests.e2e.harness import Appliance, Receiver, create_tenant

PASSWORD = "s3cret-Pa55word"


@dataclass(frozen=True, kw_only=True)
class Source:
    """The stopped appliance's database and what was issued on it."""

    path: Path
    tenant_id: str
    other_tenant_id: str
    api_key: str
    revoked_key: str
    session_token: str
    stopped_at: int  # ms, after the appliance stopped


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Source:
    data = tmp_path_factory.mktemp("sqlite")
    acme = create_tenant(data, "acme")
    globex = create_tenant(data, "globex")
    receiver = Receiver()
    app = Appliance(data).start()
    try:
        with app.client(acme["api_key"]) as api:
            future = format_instant(int(time.time()) * 1000 + 3_600_000)
            for body in (
                {"name": "tick", "cron": "* * * * * *", "payload": {"n": 1}},
                {"name": "once", "at": future, "payload": {"n": 2}},
                {"name": "hourly", "every": "1h", "payload": {"n": 3}},
                {
                    "name": "weekday",
                    "cron": "0 9 * * 1-5",
                    "timezone": "Europe/Paris",
                    "body": "a=1",
                },
            ):
                made = api.post(
                    "/v1/schedules",
                    json={"target_url": receiver.url, **body},
                    headers={"Idempotency-Key": f"create-{body['name']}"},
                )
                assert made.status_code == 201, made.text
            receiver.wait_for(lambda ds: len(ds) >= 3)
    finally:
        assert app.kill(signal.SIGTERM) == 0, "".join(app.log)
        receiver.close()
    db = Database.open(data / "steeple.db")
    try:
        now = int(time.time() * 1000)
        tenant_id = acme["tenant_id"]
        user = db.write_now(
            create_user,
            email="Ada@Example.com",
            tenant_id=tenant_id,
            role=Role.OWNER,
            operator=False,
            password_hash="$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA",
            now=now,
        )
        token = db.write_now(start_session, user_id=user.id, address="127.0.0.1", now=now)
        db.write_now(reserve_attempt, subjects=("email:ada@example.com",), now=now)
        db.write_now(
            rotate_signing_secret,
            tenant_id=tenant_id,
            overlap_ms=86_400_000,
            now=now,
            actor=Actor.operator(),
        )
        spare = db.write_now(
            issue_api_key,
            tenant_id=tenant_id,
            name="spare",
            scope=Scope.READ,
            now=now,
            actor=Actor.operator(),
        )
        db.write_now(
            revoke_api_key,
            tenant_id=tenant_id,
            key_id=spare.key.id,
            now=now,
            actor=Actor.operator(),
        )
        db.write_now(set_target, tenant_id=tenant_id, url=receiver.url, now=now)
        db.write_now(append_event, tenant_id=tenant_id, type=EventType.RUN_FAILED, now=now)
        # Values a copy must escape: control characters, backslashes, non-ASCII, any byte.
        tricky = "tab\there\nnewline \\N back\\slash ünï 😀"
        db.write_now(
            append_event,
            tenant_id=tenant_id,
            type=EventType.SCHEDULE_UPDATED,
            now=now,
            data={"text": tricky},
        )
        db.write_now(
            lambda c: c.execute(
                "UPDATE schedules SET body = ? WHERE name = 'weekday'", (bytes(range(256)),)
            )
        )
    finally:
        db.close()
    return Source(
        path=data / "steeple.db",
        tenant_id=tenant_id,
        other_tenant_id=globex["tenant_id"],
        api_key=acme["api_key"],
        revoked_key=spare.api_key,
        session_token=token,
        stopped_at=now,
    )


@pytest.fixture
def source(built: Source, tmp_path: Path) -> Source:
    """A copy of the built database of this test's own (a test may change it)."""
    folder = tmp_path / "data"
    folder.mkdir()
    for suffix in ("", "-wal"):
        companion = built.path.with_name(built.path.name + suffix)
        if companion.exists():
            shutil.copy2(companion, folder / companion.name)
    return Source(**{**built.__dict__, "path": folder / built.path.name})


def read_both(source: Source, url: str, fn: Callable[[Store], Any]) -> tuple[Any, Any]:
    lite, pg = Database.open(source.path), PgDatabase.open(url, pool_size=1)
    try:
        return fn(lite), fn(pg)
    finally:
        lite.close()
        pg.close()


def target_rows(url: str) -> dict[str, int]:
    """Rows of every table of the target's schema (none: no tables at all)."""
    with psycopg.connect(url, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_name <> 'steeple_schema'"
            )
        ]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}  # type: ignore[index]


def sqlite_rows(path: Path) -> dict[str, int]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
            )
        ]
        return {n: int(conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]) for n in names}  # type: ignore[index, arg-type]
    finally:
        conn.close()


def test_the_copy_reads_the_same_through_the_store_functions(source: Source, pg_dsn: str) -> None:
    report = migrate_store(source.path, pg_dsn, dry_run=False)

    rows = sqlite_rows(source.path)
    assert {t.name: t.copied for t in report.tables} == rows == target_rows(pg_dsn)
    for busy in ("tenants", "schedules", "job_runs", "attempts", "events", "bodies", "users"):
        assert rows[busy] > 0, busy  # the source really holds each kind of row
    assert {"sessions", "login_failures", "notifications", "request_keys"} <= {
        name for name, n in rows.items() if n
    }
    checked = {t.name for t in report.tables if t.checksum}
    assert {"job_runs", "schedules", "api_keys", "signing_secrets", "events"} <= checked

    tenant, now = source.tenant_id, source.stopped_at

    def everything(store: Store) -> dict[str, Any]:
        schedules = store.read_now(list_schedules, tenant_id=tenant, limit=100)
        runs = {
            s.id: store.read_now(list_runs, tenant_id=tenant, schedule_id=s.id, limit=1000)
            for s in schedules
        }
        return {
            "tenants": store.read_now(list_tenants),
            "schedules": schedules,
            "runs": runs,
            "attempts": [
                store.read_now(list_attempts, run_id=r.id) for rs in runs.values() for r in rs
            ],
            "events": store.read_now(list_events, tenant_id=tenant, limit=1000),
            "events_after_2": store.read_now(list_events, tenant_id=tenant, after=2, limit=3),
            "caller": store.read_now(caller_for_api_key, api_key=source.api_key),
            "revoked": store.read_now(caller_for_api_key, api_key=source.revoked_key),
            "secrets": store.read_now(active_secrets, tenant_id=tenant, now=now),
            "user": store.read_now(user_by_email, email="ada@example.com"),
            "session": store.read_now(find_session, token=source.session_token, now=now),
            "throttled": store.read_now(throttled, subjects=("email:ada@example.com",), now=now),
            "notifications": store.read_now(list_notifications, tenant_id=tenant),
            "rowid_order": store.read_now(
                lambda c: c.execute("SELECT rowid, id FROM job_runs ORDER BY rowid").fetchall()
            ),
        }

    lite, pg = read_both(source, pg_dsn, everything)
    assert [tuple(r) for r in pg.pop("rowid_order")] == [tuple(r) for r in lite.pop("rowid_order")]
    assert pg == lite
    assert lite["caller"] is not None and lite["caller"].tenant_id == tenant
    assert lite["revoked"] is None and lite["session"] is not None
    delivered = [r for rs in lite["runs"].values() for r in rs if r.state == "succeeded"]
    assert delivered and all(r.idempotency_key for r in delivered)
    assert any(s.next_fire_at is not None for s in lite["schedules"])

    # The cursors carry on alike: the next planner pass plans the same rows on both.
    later = now + 5_000

    def plan_and_list(store: Store) -> list[Any]:
        store.write_now(plan_once, now=later, config=PlannerConfig())
        return everything(store)["runs"]

    lite_runs, pg_runs = read_both(source, pg_dsn, plan_and_list)
    assert pg_runs == lite_runs
    assert sum(map(len, pg_runs.values())) > sum(map(len, pg["runs"].values()))


def test_new_rows_continue_after_the_copied_numbers(source: Source, pg_dsn: str) -> None:
    conn = apsw.Connection(str(source.path))
    newest = int(conn.execute("SELECT max(seq) FROM events").fetchone()[0])  # type: ignore[index, arg-type]
    conn.execute("DELETE FROM events WHERE seq = ?", (newest,))  # retention may prune it
    top_rowid = int(conn.execute("SELECT max(rowid) FROM api_keys").fetchone()[0])  # type: ignore[index, arg-type]
    conn.close()

    migrate_store(source.path, pg_dsn, dry_run=False)

    pg = PgDatabase.open(pg_dsn, pool_size=1)
    try:
        at = source.stopped_at + 1
        seq = pg.write_now(
            append_event, tenant_id=source.tenant_id, type=EventType.RUN_FAILED, now=at
        )
        assert seq == newest + 1  # an event number is never given twice, as in SQLite
        issued = pg.write_now(
            issue_api_key,
            tenant_id=source.tenant_id,
            name="new",
            scope=Scope.WRITE,
            now=at,
            actor=Actor.operator(),
        )
        rowid = pg.read_now(
            lambda c: c.execute(
                "SELECT rowid FROM api_keys WHERE id = ?", (issued.key.id,)
            ).fetchone()[0]
        )
        assert rowid == top_rowid + 1
        pg.write_now(reserve_attempt, subjects=("addr:127.0.0.2",), now=at)  # its id is new
        assert pg.read_now(caller_for_api_key, api_key=issued.api_key) is not None
    finally:
        pg.close()


def test_a_target_with_the_schema_and_no_rows_is_accepted(
    source: Source, pg_store_dsn: str
) -> None:
    report = migrate_store(source.path, pg_store_dsn, dry_run=False)

    assert {t.name: t.copied for t in report.tables} == target_rows(pg_store_dsn)
    assert report.rows == sum(sqlite_rows(source.path).values()) > 0


def test_a_second_copy_into_a_filled_target_is_refused_and_changes_nothing(
    source: Source, pg_dsn: str
) -> None:
    migrate_store(source.path, pg_dsn, dry_run=False)
    before = target_rows(pg_dsn)
    with pytest.raises(StoreError, match=r"is not empty: .*tenants: 2 rows"):
        migrate_store(source.path, pg_dsn, dry_run=False)
    with pytest.raises(StoreError, match="is not empty"):
        migrate_store(source.path, pg_dsn, dry_run=True)
    assert target_rows(pg_dsn) == before


def test_a_failure_midway_leaves_the_target_without_rows(source: Source, pg_dsn: str) -> None:
    # An attempt of no run: SQLite took it with its foreign keys off; PostgreSQL refuses it
    # after tenants, schedules, bodies and runs were copied.
    conn = apsw.Connection(str(source.path))
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(
        "INSERT INTO attempts (run_id, attempt, lease_token, incarnation_id, started_at)"
        " VALUES ('run_none', 1, 'tok', 'inc_none', 0)"
    )
    conn.close()

    with pytest.raises(StoreError) as raised:
        migrate_store(source.path, pg_dsn, dry_run=False)

    said = str(raised.value)
    assert "copying table attempts failed" in said and "\n" not in said
    rows = target_rows(pg_dsn)
    assert rows and set(rows.values()) == {0}  # the schema migrated; no row of the copy
    migrate_store(source.path, pg_dsn, dry_run=True)  # and still empty enough to retry


def test_a_copy_that_differs_from_the_source_is_not_committed(
    source: Source, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_sequences = transfer._set_sequences

    def and_change_a_key(raw: Any, name: str, identities: list[str], *, floor: int) -> None:
        set_sequences(raw, name, identities, floor=floor)
        if name == "job_runs":  # as a lossy copy might: the row is there, its key is not
            raw.execute(
                "UPDATE job_runs SET idempotency_key = 'other'"
                " WHERE rowid = (SELECT min(rowid) FROM job_runs)"
            )

    monkeypatch.setattr(transfer, "_set_sequences", and_change_a_key)
    with pytest.raises(StoreError, match="job_runs: the copy's id, idempotency_key"):
        migrate_store(source.path, pg_dsn, dry_run=False)
    assert set(target_rows(pg_dsn).values()) == {0}


def test_a_dry_run_counts_and_writes_nothing(source: Source, pg_dsn: str) -> None:
    report = migrate_store(source.path, pg_dsn, dry_run=True)

    assert report.dry_run
    assert {t.name: t.rows for t in report.tables} == sqlite_rows(source.path)
    assert all(t.copied is None for t in report.tables)
    assert target_rows(pg_dsn) == {}  # not even the schema
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT to_regclass('steeple_schema')").fetchone() == (None,)


def test_refused_while_the_appliance_holds_the_lock(source: Source, pg_dsn: str) -> None:
    with LockFile(source.path.with_name("steeple.db.lock")):
        with pytest.raises(DatabaseLocked, match="stop it first"):
            migrate_store(source.path, pg_dsn, dry_run=False)
    assert target_rows(pg_dsn) == {}


def test_refused_until_the_source_is_migrated(tmp_path: Path, pg_dsn: str) -> None:
    path = tmp_path / "steeple.db"
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    for number, sql in migrations()[:-1]:
        conn.execute(sql)
        conn.execute(f"PRAGMA user_version = {number}")
    conn.close()

    with pytest.raises(StoreError, match=f"steeple migrate --data-dir {tmp_path}"):
        migrate_store(path, pg_dsn, dry_run=False)
    assert target_rows(pg_dsn) == {}


def test_refused_for_a_source_newer_than_this_steeple(source: Source, pg_dsn: str) -> None:
    conn = apsw.Connection(str(source.path))
    conn.execute(f"PRAGMA user_version = {len(migrations()) + 1}")
    conn.close()

    with pytest.raises(StoreError, match="newer than this Steeple's"):
        migrate_store(source.path, pg_dsn, dry_run=True)
    assert target_rows(pg_dsn) == {}


def with_password(url: str) -> str:
    """The same URL with a password (the test server trusts local connections: ignored)."""
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{PASSWORD}@{host}"


def test_the_command_prints_the_report_and_checklist_never_the_password(
    source: Source, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = with_password(pg_dsn)
    args = ["migrate-store", "--from", f"sqlite:{source.path.parent}", "--to", url]

    assert main([*args, "--dry-run"]) == 0
    dry, _ = capsys.readouterr()
    assert "dry run: would copy" in dry and "nothing was written" in dry
    assert main(args) == 0
    done, _ = capsys.readouterr()
    assert main(args) == 1  # a second time: refused, one line
    _, refused = capsys.readouterr()

    assert "row counts and checksums verified" in done
    assert "Cut-over checklist:" in done
    assert f"steeple serve --database {pg_dsn}" in done  # the URL without its password
    assert f"steeple serve --data-dir {source.path.parent}" in done
    assert refused.startswith("steeple: error: ") and refused.count("\n") == 1
    assert "is not empty" in refused
    for printed in (dry, done, refused):
        assert PASSWORD not in printed


def test_the_command_refuses_bad_arguments_in_one_line_without_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unreachable = f"postgresql://steeple:{PASSWORD}@127.0.0.1:1/steeple"
    db = Database.open(tmp_path / "steeple.db")
    db.close()
    cases = {
        ("--from", str(tmp_path), "--to", unreachable): "--from: expected sqlite:PATH",
        ("--from", f"sqlite:{tmp_path}", "--to", "mysql://x"): "--to: expected a postgresql://",
        ("--from", f"sqlite:{tmp_path / 'none.db'}", "--to", unreachable): "is not a file",
        ("--from", f"sqlite:{tmp_path}", "--to", unreachable): "is unreachable",
    }
    for given, expected in cases.items():
        assert main(["migrate-store", *given]) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert err.startswith("steeple: error: ") and expected in err, err
        assert PASSWORD not in err
