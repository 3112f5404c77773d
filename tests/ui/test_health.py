"""The operator's health page shows the figures ``/metrics`` and ``steeple status`` show,
computed by one function (``store.figures.operator.operator_figures``); tenant users get 404."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families
from quart_trio import QuartTrio

from appliance.core.events import EventType
from appliance.core.instants import format_instant
from appliance.core.runs import AttemptOutcome, Transition
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.events import SYSTEM_TENANT, append_event
from appliance.store.figures.operator import operator_figures, percentile
from appliance.store.incarnations import record_check, register_incarnation
from appliance.store.infra.connection import Connection
from appliance.store.infra.database import Database
from appliance.store.schedules import get_schedule
from appliance.store.users import Role, create_user
from tests.api.conftest import START, FakeClock, deliver_due, plan_runs
from tests.ui.conftest import _HASH, Browser, Tenant, schedule_form

LOOPBACK = {"client": ("127.0.0.1", 40000)}


def add_operator(db: Database) -> str:
    db.write_now(
        create_user,
        email="ops@example.com",
        tenant_id=None,
        role=Role.OWNER,
        operator=True,
        password_hash=_HASH,
        now=START,
    )
    return "ops@example.com"


def retry_one(db: Database, *, now: int) -> None:
    """Claim the one due run and answer its attempt 503: it waits for a retry."""
    owner = db.write_now(register_incarnation, pid=2, now=now)
    (run,) = db.write_now(claim_runs, owner=owner, now=now, lease_ms=60_000, limit=10).runs
    retry = Completion(
        outcome=AttemptOutcome.RETRYABLE,
        transition=Transition.RETRY,
        due_at=now + 60_000,
        failure_reason=None,
        http_status=503,
        error="HTTP 503",
        latency_ms=5,
        response_excerpt="busy",
    )
    assert db.write_now(complete_run, run=run, completion=retry, now=now + 5)


def cell(text: str, cell_id: str) -> str:
    found = re.search(rf'<td id="{cell_id}">([^<]*)</td>', text)
    assert found, cell_id
    return found.group(1)


async def test_health_shows_the_same_figures_as_metrics(
    app: QuartTrio, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    editor = Browser(app)
    await editor.sign_in(alpha.editor)
    created = await editor.post("/schedules/new", schedule_form(cron="* * * * * *"))
    schedule_id = created.headers["Location"].split("/")[2].split("?")[0]
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert schedule is not None
    due = plan_runs(db, schedule, after=START, count=4)  # one a second, no jitter
    clock.advance(5000)
    assert len(deliver_due(db, now=clock.now)) == 4
    late = sorted(clock.now - at for at in due)
    plan_runs(db, schedule, after=clock.now, count=1)
    clock.advance(1000)
    retry_one(db, now=clock.now)
    incarnation = db.write_now(register_incarnation, pid=1, now=clock.now)
    db.write_now(record_check, incarnation_id=incarnation, now=clock.now)
    db.write_now(
        append_event, tenant_id=SYSTEM_TENANT, type=EventType.CLOCK_JUMP_DETECTED, now=clock.now
    )
    clock.advance(1000)

    figures = db.read_now(operator_figures, disk=db.disk, now=clock.now)
    assert figures.delivered_per_minute == 0.8  # 4 runs over five minutes
    assert (figures.lateness_p50_ms, figures.lateness_p99_ms) == (late[1], late[3])
    assert figures.clock_jumps_24h == 1 and figures.last_check_ms == clock.now - 1000

    operator = Browser(app)
    await operator.sign_in(add_operator(db))
    page = await operator.get("/admin/health")
    assert page.status == 200 and 'href="/admin/health"' in page.text
    assert cell(page.text, "h-delivered") == "0.8"
    assert cell(page.text, "h-lateness") == f"{late[1] / 1000:g} s / {late[3] / 1000:g} s"
    assert cell(page.text, "h-jumps") == "1"
    assert cell(page.text, "h-check") == format_instant(clock.now - 1000)
    assert cell(page.text, "h-running") == "0"
    assert cell(page.text, "h-retrying") == "1" and figures.health.runs_retrying == 1

    scraped = await app.test_client().get("/metrics", scope_base=LOOPBACK)
    samples = {
        s.name: s.value
        for family in text_string_to_metric_families(await scraped.get_data(as_text=True))
        for s in family.samples
    }
    assert samples["steeple_recent_delivered_per_minute"] == 0.8
    assert samples["steeple_recent_dispatch_lateness_p50_seconds"] == late[1] / 1000
    assert samples["steeple_recent_dispatch_lateness_p99_seconds"] == late[3] / 1000
    assert samples["steeple_recent_clock_jumps"] == 1
    assert samples["steeple_db_check_last_success_timestamp_seconds"] == (clock.now - 1000) / 1000
    if isinstance(db, Database):  # a SQLite file: PostgreSQL's disk is its server's
        assert samples["steeple_disk_free_bytes"] > 0
    assert samples["steeple_runs_retrying"] == 1
    assert samples["steeple_runs_breaker_waiting"] == 0 and cell(page.text, "h-breaker") == "0"

    def hold_by_breaker(conn: Connection) -> None:  # as engine/breakers.py parks a run
        conn.execute(
            "UPDATE job_runs SET failure_reason = 'breaker_open' WHERE state = 'retry_wait'"
        )

    db.write_now(hold_by_breaker)
    held = db.read_now(operator_figures, disk=db.disk, now=clock.now)
    assert held.health.runs_breaker_waiting == 1
    assert cell((await operator.get("/admin/health")).text, "h-breaker") == "1"
    scraped = await app.test_client().get("/metrics", scope_base=LOOPBACK)
    families = text_string_to_metric_families(await scraped.get_data(as_text=True))
    held_samples = {s.name: s.value for family in families for s in family.samples}
    assert held_samples["steeple_runs_breaker_waiting"] == 1


async def test_the_health_page_does_not_exist_for_tenant_users(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.owner)
    assert (await browser.get("/admin/health")).status == 404
    assert "Health (operator)" not in (await browser.get("/")).text


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([5], 99) == 5
    assert [percentile(list(range(1, 101)), p) for p in (50, 99)] == [50, 99]
