"""The UI's pages and actions without JavaScript: each does what the API's route for the
same thing does, through the same store function (the database is checked directly)."""

from __future__ import annotations

import itertools

from appliance.core.cron import occurrences_after, parse_cron
from appliance.core.instants import format_instant
from appliance.core.runs import RunState
from appliance.store.api_keys import list_api_keys
from appliance.store.events import list_events
from appliance.store.infra.database import Database
from appliance.store.invitations import pending_invitations
from appliance.store.runs import get_run
from appliance.store.schedules import get_schedule, list_schedules
from appliance.store.tenants import list_signing_secrets
from tests.api.conftest import START, FakeClock, deliver_due, plan_runs
from tests.ui.conftest import Browser, Tenant, schedule_form


def location_id(page_location: str) -> str:
    return page_location.split("/")[2].split("?")[0]


async def test_create_through_the_form_records_the_user_as_actor(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    form = await browser.get("/schedules/new")
    for label in ("Name", "Cron", "Timezone", "Target URL", "Payload"):
        assert f">{label}</label>" in form.text, label
    created = await browser.post("/schedules/new", schedule_form())
    assert created.status == 302
    schedule_id = location_id(created.headers["Location"])
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert schedule is not None and schedule.spec.timezone == "Europe/Berlin"
    assert schedule.spec.body == b'{"kind":"report"}'
    (event,) = [  # beside the sign-in's own event
        e for e in db.read_now(list_events, tenant_id=alpha.id) if e.type == "schedule.created"
    ]
    assert event.actor is not None and str(event.actor.kind) == "user"
    page = await browser.get(created.headers["Location"])
    assert "Schedule created." in page.text and "nightly report" in page.text


async def test_a_double_submit_creates_one_schedule(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    first = await browser.post("/schedules/new", schedule_form())
    second = await browser.post("/schedules/new", schedule_form())
    assert first.headers["Location"] == second.headers["Location"]
    assert len(db.read_now(list_schedules, tenant_id=alpha.id, limit=10)) == 1
    other = await browser.post("/schedules/new", schedule_form(form_key="m" * 43))
    assert other.headers["Location"] != first.headers["Location"]


async def test_the_apis_field_errors_show_inline_and_keep_what_was_typed(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    bad = schedule_form(
        cron="61 * * * *", timezone="Mars/Olympus", payload="{not json", max_attempts="x"
    )
    page = await browser.post("/schedules/new", bad)
    assert page.status == 422
    assert 'id="cron-error"' in page.text and 'id="timezone-error"' in page.text
    assert 'id="payload-error"' in page.text and "is not JSON" in page.text
    assert 'id="max_attempts-error"' in page.text
    assert 'value="61 * * * *"' in page.text and "{not json</textarea>" in page.text
    blocked = await browser.post(
        "/schedules/new", schedule_form(target_url="https://intranet.example.com/x")
    )
    assert blocked.status == 422 and 'id="target_url-error"' in blocked.text
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []


async def test_the_preview_shows_the_engines_instants_in_the_zone_and_in_utc(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.viewer)
    fragment = await browser.post(
        "/schedules/preview",
        {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "target_url": ""},
    )
    assert fragment.status == 200 and "<html" not in fragment.text
    spec = parse_cron("30 2 * * *", "Europe/Berlin")
    for ms in itertools.islice(occurrences_after(spec, START), 5):
        assert format_instant(ms) in fragment.text
    assert "CET" in fragment.text
    dst = await browser.post(
        "/schedules/preview", {"cron": "0 12 * * *", "timezone": "Europe/Berlin"}
    )
    assert "CET" in dst.text
    wrong = await browser.post("/schedules/preview", {"cron": "0 25 * * *", "timezone": "UTC"})
    assert "cron" in wrong.text and "<table" not in wrong.text


async def test_the_preview_flags_a_dst_change(
    browser: Browser, alpha: Tenant, clock: FakeClock
) -> None:
    clock.now = 1_774_569_600_000  # 2026-03-27T00:00:00Z, two days before Berlin's DST
    await browser.sign_in(alpha.viewer)
    fragment = await browser.post(
        "/schedules/preview", {"cron": "30 12 * * *", "timezone": "Europe/Berlin"}
    )
    assert "UTC offset changed to +02:00" in fragment.text and "CEST" in fragment.text


async def test_edit_pause_resume_run_now_and_delete(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    schedule_id = location_id(
        (await browser.post("/schedules/new", schedule_form())).headers["Location"]
    )
    edit = await browser.get(f"/schedules/{schedule_id}/edit")
    assert 'value="nightly report"' in edit.text
    saved = await browser.post(
        f"/schedules/{schedule_id}/edit",
        schedule_form(name="renamed", cron="0 4 * * *") | {"version": "1"},
    )
    assert saved.status == 302
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert schedule is not None and schedule.spec.name == "renamed" and schedule.version == 2
    stale = await browser.post(
        f"/schedules/{schedule_id}/edit", schedule_form(name="lost") | {"version": "1"}
    )
    assert stale.status == 409  # someone saved since this form was opened
    await browser.post(f"/schedules/{schedule_id}/pause", {})
    paused = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert paused is not None and paused.spec.paused
    await browser.post(f"/schedules/{schedule_id}/resume", {})
    run = await browser.post(f"/schedules/{schedule_id}/run", {})
    run_id = location_id(run.headers["Location"])
    assert db.read_now(get_run, tenant_id=alpha.id, run_id=run_id) is not None
    confirm = await browser.get(f"/schedules/{schedule_id}/delete")
    assert "cannot be undone" in confirm.text
    await browser.post(f"/schedules/{schedule_id}/delete", {})
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id) is None


async def test_failed_runs_replay_selected_and_all_matching_with_the_exact_count(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    await browser.sign_in(alpha.editor)
    schedule_id = location_id(
        (await browser.post("/schedules/new", schedule_form(cron="* * * * * *"))).headers[
            "Location"
        ]
    )
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert schedule is not None
    plan_runs(db, schedule, after=START, count=3)
    clock.advance(5000)
    failed_ids = deliver_due(db, now=clock.now, status=410)
    assert len(failed_ids) == 3
    clock.advance(1000)
    page = await browser.get("/failed")
    assert all(run_id in page.text for run_id in failed_ids)
    await browser.post("/failed/replay", {"run": failed_ids[0]})
    assert db.read_now(get_run, tenant_id=alpha.id, run_id=failed_ids[0]).state is RunState.PENDING  # type: ignore[union-attr]
    confirm = await browser.get("/failed/replay-all")
    assert "exactly <strong>2</strong> failed runs" in confirm.text
    done = await browser.post(
        "/failed/replay-all", {"as_of": format_instant(clock.now // 1000 * 1000)}
    )
    assert done.headers["Location"] == "/failed?replayed=2"
    states = {db.read_now(get_run, tenant_id=alpha.id, run_id=r).state for r in failed_ids}  # type: ignore[union-attr]
    assert states == {RunState.PENDING}


async def test_owner_creates_and_revokes_a_key_rotates_a_secret_and_adds_a_user(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.owner)
    issued = await browser.post("/settings/keys", {"name": "ci <b>", "scope": "read"})
    assert issued.status == 201 and "it will not be shown again" in issued.text
    assert "ci &lt;b&gt;" in issued.text
    keys = db.read_now(list_api_keys, tenant_id=alpha.id)
    read_key = next(k for k in keys if k.name == "ci <b>")
    assert read_key.prefix is not None and read_key.prefix in issued.text
    shown = issued.text.split('id="new-key">')[1].split("<")[0]
    assert shown.startswith(read_key.prefix)
    listing = await browser.get("/settings/keys")
    assert read_key.prefix in listing.text and shown not in listing.text  # never again
    await browser.post(f"/settings/keys/{read_key.id}/revoke", {})
    assert read_key.id not in {k.id for k in db.read_now(list_api_keys, tenant_id=alpha.id)}
    rotated = await browser.post("/settings/secrets/rotate", {"overlap_seconds": "60"})
    assert rotated.status == 201 and "whsec_" in rotated.text
    secrets = db.read_now(list_signing_secrets, tenant_id=alpha.id, now=START)
    assert len(secrets) == 2 and secrets[1].expires_at == START + 60_000
    added = await browser.post("/settings/users", {"email": "Eve@Alpha.example", "role": "viewer"})
    assert added.status == 201 and "/setup/" in added.text
    invited = db.read_now(pending_invitations, tenant_id=alpha.id, now=START)
    assert [i.email for i in invited] == ["eve@alpha.example"] and "eve@alpha.example" in added.text


async def test_dashboard_events_and_guide_render_the_tenants_values(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    await browser.post("/schedules/new", schedule_form())
    dashboard = await browser.get("/")
    assert "schedule due in the next 24 h" in dashboard.text and "nightly report" in dashboard.text
    events = await browser.get("/events")
    assert "schedule.created" in events.text
    newest = events.text.split("/events/new?after=")[1].split('"')[0]
    nothing = await browser.get(f"/events/new?after={newest}")
    assert nothing.text.strip() == ""
    await browser.post("/schedules/new", schedule_form(form_key="n" * 43))
    one = await browser.get(f"/events/new?after={newest}")
    assert "1 new event: show" in one.text
    guide = await browser.get("/guide")
    assert alpha.id in guide.text and "verify_delivery" in guide.text


async def test_the_dashboard_lists_each_schedule_once_at_its_next_occurrence(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    quarter = schedule_form(name="quarterly", cron="*/15 * * * *", timezone="UTC")
    hourly = schedule_form(name="hourly", cron="0 * * * *", timezone="UTC", form_key="h" * 43)
    await browser.post("/schedules/new", quarter)
    await browser.post("/schedules/new", hourly)
    page = await browser.get("/")
    next_up = page.text.split('id="next"')[1].split("</ol>")[0]
    # START is 10:00:00.4 UTC: quarterly next at 10:15, hourly at 11:00 (docs/ui.md)
    assert next_up.count("<li>") == 2, next_up
    assert next_up.index(">quarterly<") < next_up.index(">hourly<")
    assert "2026-03-02 10:15:00 UTC" in next_up and "2026-03-02 11:00:00 UTC" in next_up


async def test_selected_schedules_pause_resume_and_run_together_or_not_at_all(
    browser: Browser, alpha: Tenant, beta: Tenant, db: Database
) -> None:
    other = Browser(browser.app)
    await other.sign_in(beta.editor)
    foreign = location_id((await other.post("/schedules/new", schedule_form())).headers["Location"])
    await browser.sign_in(alpha.editor)
    ids = [
        location_id(
            (await browser.post("/schedules/new", schedule_form(form_key=k * 43))).headers[
                "Location"
            ]
        )
        for k in "ab"
    ]
    listing = await browser.get("/schedules")
    assert listing.text.count('form="bulk" name="schedule"') == 2

    def paused() -> set[bool]:
        found = [db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=i) for i in ids]
        return {s.spec.paused for s in found if s is not None}

    refused = await browser.post(
        "/schedules/selected", {"schedule": [*ids, foreign], "action": "pause"}
    )
    assert refused.status == 404 and paused() == {False}, (refused.headers, refused.text)
    done = await browser.post("/schedules/selected", {"schedule": ids, "action": "pause"})
    assert done.headers["Location"] == "/schedules?done=paused" and paused() == {True}
    await browser.post("/schedules/selected", {"schedule": ids, "action": "resume"})
    assert paused() == {False}
    await browser.post("/schedules/selected", {"schedule": ids, "action": "run"})
    for schedule_id in ids:
        page = await browser.get(f"/schedules/{schedule_id}")
        assert "(manual)" in page.text
    bad = await browser.post("/schedules/selected", {"schedule": ids, "action": "explode"})
    assert bad.status == 422


async def test_schedules_are_said_in_words_beside_their_expression(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form(cron="30 9 * * 1-5"))
    listing = await browser.get("/schedules")
    assert "<code>30 9 * * 1-5</code>" in listing.text
    assert "At 09:30 on Monday through Friday" in listing.text
    detail = await browser.get(created.headers["Location"])
    assert "At 09:30 on Monday through Friday" in detail.text
