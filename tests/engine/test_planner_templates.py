"""The planner renders a payload template once per run (docs/schedules.md, "Payload
variables"): each run's window starts at the occurrence before it, across passes and
restarts alike, and a first occurrence after ``start_at`` has none."""

from __future__ import annotations

import json

import apsw

from appliance.core.instants import format_scheduled_for
from appliance.core.occurrence_cache import OccurrenceCache
from appliance.core.schedules import PayloadKind
from appliance.store.infra.database import Database
from appliance.store.schedules import create_schedule
from appliance.store.tenants import create_tenant
from appliance.store.usecases.backfill import backfill
from appliance.store.usecases.manual import trigger_schedule
from tests.engine.test_planner_kinds import plan_until_done, spec
from tests.store.conftest import T0

MINUTE = 60_000
TEMPLATE = b'{"from":"{{window_start}}","to":"{{window_end}}","run":"{{run_id}}"}'


def bodies(db: Database, schedule_id: str) -> list[tuple[str, dict[str, str]]]:
    def query(conn: apsw.Connection) -> list[tuple[str, dict[str, str]]]:
        return [
            (str(run_id), json.loads(body))
            for run_id, body in conn.execute(
                "SELECT r.id, b.body FROM job_runs r JOIN bodies b ON b.digest = r.body_digest"
                " WHERE r.schedule_id = ? ORDER BY r.scheduled_for",
                (schedule_id,),
            )
        ]

    return db.read_now(query)


def test_each_run_is_rendered_with_the_occurrence_before_it(engine_db: Database) -> None:
    tenant = engine_db.write_now(create_tenant, name="t", now=T0).tenant_id
    templated = spec(
        every_seconds=60,
        start_at=T0 + MINUTE,
        payload_kind=PayloadKind.JSON,
        body=TEMPLATE,
        templated=True,
    )
    sid = engine_db.write_now(create_schedule, tenant_id=tenant, spec=templated, now=T0).id
    cache = OccurrenceCache()
    plan_until_done(engine_db, T0 + 3 * MINUTE, cache)  # three runs in one pass
    plan_until_done(engine_db, T0 + 5 * MINUTE, OccurrenceCache())  # two more, as if restarted
    found = bodies(engine_db, sid)
    instants = [format_scheduled_for(T0 + n * MINUTE) for n in range(1, 6)]
    assert [body["to"] for _, body in found] == instants
    assert [body["from"] for _, body in found] == [None, *instants[:-1]]
    assert [body["run"] for _, body in found] == [run_id for run_id, _ in found]

    run, _ = engine_db.write_now(
        trigger_schedule, tenant_id=tenant, schedule_id=sid, now=T0 + 5 * MINUTE + 30_500
    )
    manual = dict(bodies(engine_db, sid))[run.id]
    assert manual == {
        "from": instants[-1],
        "to": format_scheduled_for(T0 + 5 * MINUTE + 30_000),
        "run": run.id,
    }


def test_a_backfill_renders_each_run_with_the_occurrence_before_it(engine_db: Database) -> None:
    tenant = engine_db.write_now(create_tenant, name="t", now=T0).tenant_id
    templated = spec(every_seconds=60, start_at=T0 - 10 * MINUTE, body=TEMPLATE, templated=True)
    sid = engine_db.write_now(create_schedule, tenant_id=tenant, spec=templated, now=T0).id
    for start, end in ((T0 - 7 * MINUTE, T0 - 5 * MINUTE), (T0 - 10 * MINUTE, T0 - 5 * MINUTE)):
        engine_db.write_now(
            backfill,
            tenant_id=tenant,
            schedule_id=sid,
            start=start,
            end=end,
            limit=100,
            dry_run=False,
            now=T0,
            rate_per_second=10,
        )
    found = [body for _, body in bodies(engine_db, sid)]
    instants = [format_scheduled_for(T0 - n * MINUTE) for n in range(10, 4, -1)]
    assert [body["to"] for body in found] == instants
    assert [body["from"] for body in found] == [None, *instants[:-1]]
