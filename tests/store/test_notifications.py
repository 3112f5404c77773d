"""The notification outbox: a row is written in the event's own transaction, only for the
notified types and only for a tenant with a URL; claims lease rows, a lapsed lease makes
a row claimable again with the same key, and completion is fenced on the attempt."""

from __future__ import annotations

import hashlib
import json

import apsw
import pytest

from appliance.core.envelope import render_event
from appliance.core.events import EventType
from appliance.errors import StoreError
from appliance.store.active_secrets import active_secrets
from appliance.store.events import append_event, list_events
from appliance.store.infra.connection import Connection
from appliance.store.infra.database import Database
from appliance.store.notifications import (
    NotificationOutcome,
    NotificationState,
    claim_notifications,
    complete_notification,
    list_notifications,
    prune_notifications,
    set_target,
)
from appliance.store.tenants import create_tenant
from tests.store.conftest import T0

HOOK = "https://tenant.example/failures"
LEASE_MS = 60_000


def fail_event(db: Database, tenant_id: str, type: EventType = EventType.RUN_FAILED) -> int:
    return db.write_now(
        append_event,
        tenant_id=tenant_id,
        type=type,
        now=T0,
        schedule_id="sch_1",
        run_id="run_1",
        data={"reason": "gone"},
    )


@pytest.fixture
def notified(db: Database, tenant: str) -> str:
    db.write_now(set_target, tenant_id=tenant, url=HOOK, now=T0)
    return tenant


@pytest.mark.parametrize(
    "type",
    [EventType.RUN_FAILED, EventType.SCHEDULE_PAUSED_BY_RECEIVER, EventType.RUN_MISSED],
)
def test_a_notified_event_queues_one_row_carrying_its_envelope(
    db: Database, notified: str, type: EventType
) -> None:
    seq = fail_event(db, notified, type)
    (row,) = db.read_now(list_notifications, tenant_id=notified)
    (event,) = db.read_now(list_events, tenant_id=notified)
    assert (row.event_seq, row.url, row.state, row.attempts) == (seq, HOOK, "pending", 0)
    assert row.idempotency_key == hashlib.sha256(f"notification:{event.id}".encode()).hexdigest()
    (claimed,) = db.write_now(claim_notifications, now=T0, lease_ms=LEASE_MS, limit=10)
    assert json.loads(claimed.body) == render_event(event)
    assert claimed.event_type == str(type)


def test_other_types_and_tenants_without_a_url_queue_nothing(
    db: Database, notified: str, tenant: str
) -> None:
    other = db.write_now(create_tenant, name="no-url", now=T0).tenant_id
    fail_event(db, other)
    for type in (EventType.RUN_SUCCEEDED, EventType.RUN_RETRYING, EventType.SCHEDULE_PAUSED):
        fail_event(db, notified, type)
    assert db.read_now(list_notifications, tenant_id=other) == []
    assert db.read_now(list_notifications, tenant_id=notified) == []


def test_the_row_and_the_event_commit_or_roll_back_together(db: Database, notified: str) -> None:
    def append_then_fail(conn: apsw.Connection) -> None:
        append_event(conn, tenant_id=notified, type=EventType.RUN_FAILED, now=T0)
        raise RuntimeError("the rest of the transaction failed")

    with pytest.raises(RuntimeError):
        db.write_now(append_then_fail)
    assert db.read_now(list_events, tenant_id=notified) == []
    assert db.read_now(list_notifications, tenant_id=notified) == []

    def refuse_outbox(conn: Connection) -> None:
        if isinstance(db, Database):
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON notifications"
                " BEGIN SELECT RAISE(ABORT, 'outbox refused'); END"
            )
            return
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql"
            " AS 'BEGIN RAISE EXCEPTION ''outbox refused''; END'"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON notifications"
            " FOR EACH ROW EXECUTE FUNCTION refuse()"
        )

    db.write_now(refuse_outbox)
    with pytest.raises((apsw.Error, StoreError)):
        fail_event(db, notified)
    assert db.read_now(list_events, tenant_id=notified) == []


def test_a_lapsed_lease_is_claimed_again_with_the_same_key(db: Database, notified: str) -> None:
    fail_event(db, notified)
    (first,) = db.write_now(claim_notifications, now=T0, lease_ms=LEASE_MS, limit=10)
    assert first.attempt == 1
    assert first.secrets == tuple(db.read_now(active_secrets, tenant_id=notified, now=T0))
    assert (
        db.write_now(claim_notifications, now=T0 + LEASE_MS - 1, lease_ms=LEASE_MS, limit=10) == []
    )
    (again,) = db.write_now(claim_notifications, now=T0 + LEASE_MS, lease_ms=LEASE_MS, limit=10)
    assert (again.id, again.attempt) == (first.id, 2)
    assert again.idempotency_key == first.idempotency_key
    delivered = NotificationOutcome(
        state=NotificationState.DELIVERED, due_at=None, status=200, error=None, failure_reason=None
    )
    stale = db.write_now(
        complete_notification, notification_id=first.id, attempt=1, outcome=delivered, now=T0
    )
    assert stale is False
    assert db.write_now(
        complete_notification, notification_id=again.id, attempt=2, outcome=delivered, now=T0
    )
    (row,) = db.read_now(list_notifications, tenant_id=notified)
    assert (row.state, row.attempts, row.last_status) == ("delivered", 2, 200)
    later = T0 + 10 * LEASE_MS
    assert db.write_now(claim_notifications, now=later, lease_ms=LEASE_MS, limit=10) == []


def test_a_retry_waits_for_its_due_time(db: Database, notified: str) -> None:
    fail_event(db, notified)
    (claimed,) = db.write_now(claim_notifications, now=T0, lease_ms=LEASE_MS, limit=10)
    retry = NotificationOutcome(
        state=NotificationState.PENDING,
        due_at=T0 + 5_000,
        status=500,
        error=None,
        failure_reason=None,
    )
    db.write_now(
        complete_notification, notification_id=claimed.id, attempt=1, outcome=retry, now=T0
    )
    assert db.write_now(claim_notifications, now=T0 + 4_999, lease_ms=LEASE_MS, limit=10) == []
    (second,) = db.write_now(claim_notifications, now=T0 + 5_000, lease_ms=LEASE_MS, limit=10)
    assert second.attempt == 2


def test_pruning_takes_finished_rows_older_than_the_cutoff_and_never_pending_ones(
    db: Database, notified: str
) -> None:
    fail_event(db, notified)
    fail_event(db, notified, EventType.RUN_MISSED)
    first, _ = db.write_now(claim_notifications, now=T0, lease_ms=LEASE_MS, limit=10)
    done = NotificationOutcome(
        state=NotificationState.FAILED, due_at=None, status=410, error=None, failure_reason="gone"
    )
    db.write_now(complete_notification, notification_id=first.id, attempt=1, outcome=done, now=T0)
    assert db.write_now(prune_notifications, before=T0, limit=10) == 0
    assert db.write_now(prune_notifications, before=T0 + 1, limit=10) == 1
    (left,) = db.read_now(list_notifications, tenant_id=notified)
    assert left.state == "pending"
