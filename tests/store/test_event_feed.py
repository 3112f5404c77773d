"""The event feed's filters combine correctly (each is a bounded index range in seq
order: tests/store/test_query_plans.py)."""

from __future__ import annotations

from appliance.core.events import EventType
from appliance.store.events import SYSTEM_TENANT, append_event, list_events, newest_feed_seq
from appliance.store.infra.database import Database

NOW = 1_790_000_000_000
E = EventType


def test_filters_combine_and_system_events_join_in_order(db: Database) -> None:
    def add(tenant: str, type_: EventType, schedule: str | None = None) -> None:
        db.write_now(append_event, tenant_id=tenant, type=type_, now=NOW, schedule_id=schedule)

    add("ten_a", E.SCHEDULE_CREATED, "sch_1")
    add(SYSTEM_TENANT, E.CLOCK_JUMP_DETECTED)
    add("ten_a", E.RUN_FAILED, "sch_1")
    add("ten_b", E.RUN_FAILED, "sch_2")
    add("ten_a", E.RUN_FAILED, "sch_3")
    add("ten_a", E.SCHEDULE_PAUSED, "sch_1")

    def seqs(**filters: object) -> list[int]:
        return [e.seq for e in db.read_now(list_events, tenant_id="ten_a", **filters)]  # type: ignore[arg-type]

    assert seqs() == [1, 2, 3, 5, 6]
    assert seqs(after=2, limit=2) == [3, 5]
    assert seqs(types=frozenset({E.RUN_FAILED})) == [3, 5]
    assert seqs(types=frozenset({E.RUN_FAILED, E.CLOCK_JUMP_DETECTED})) == [2, 3, 5]
    assert seqs(schedule_id="sch_1") == [1, 3, 6]
    assert seqs(schedule_id="sch_1", types=frozenset({E.SCHEDULE_PAUSED})) == [6]
    assert seqs(schedule_id="sch_2") == []


def test_the_newest_feed_seq_is_the_tenants_or_the_systems_never_another_tenants(
    db: Database,
) -> None:
    def add(tenant: str) -> None:
        db.write_now(append_event, tenant_id=tenant, type=E.SCHEDULE_CREATED, now=NOW)

    def newest(tenant: str) -> int:
        return db.read_now(newest_feed_seq, tenant_id=tenant)

    assert newest("ten_a") == 0  # no event yet
    add("ten_a")
    add("ten_b")
    assert (newest("ten_a"), newest("ten_b")) == (1, 2)
    add(SYSTEM_TENANT)  # affects every tenant: in each feed
    assert (newest("ten_a"), newest("ten_b"), newest(SYSTEM_TENANT)) == (3, 3, 3)
    add("ten_b")
    assert (newest("ten_a"), newest("ten_b"), newest(SYSTEM_TENANT)) == (3, 4, 3)
