"""The schedule form for every kind and option of the API's schedule document: one-off
(``at``) and interval (``every``) schedules, bounds, overlap, a retry policy, a payload
template and a cron's DST policy — built into the API's JSON and validated by the API's
own functions (errors on their inputs), previewed by the API's preview functions, and
round-tripped unchanged by an edit that changes nothing."""

from __future__ import annotations

import dataclasses
import json

import pytest
from markupsafe import escape

from appliance.core.addresses import AddressPolicy
from appliance.core.instants import format_instant, parse_instant
from appliance.core.retry import RetryPolicy
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import Overlap, ScheduleSpec
from appliance.core.timing import kind_of
from appliance.store.infra.database import Database
from appliance.store.schedules import create_schedule, get_schedule, list_schedules
from tests.api.conftest import START, FakeClock
from tests.ui.conftest import Browser, Tenant, schedule_form, submitted_fields

BERLIN = "Europe/Berlin"


def stored(db: Database, tenant: Tenant, location: str) -> ScheduleSpec:
    schedule_id = location.split("/")[2].split("?")[0]
    schedule = db.read_now(get_schedule, tenant_id=tenant.id, schedule_id=schedule_id)
    assert schedule is not None
    return schedule.spec


def nothing_stored(db: Database, tenant: Tenant) -> bool:
    return db.read_now(list_schedules, tenant_id=tenant.id, limit=10) == []


async def test_create_an_interval_with_bounds_and_overlap_skip(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post(
        "/schedules/new",
        schedule_form(
            kind="every",
            cron="",
            every="90s",
            timezone=BERLIN,
            start_at="2026-12-24 18:00",  # a wall time in the schedule's zone
            end_at="2027-01-01T00:00:00Z",  # or RFC 3339 with an offset
            overlap="skip",
        ),
    )
    assert created.status == 302, created.text
    spec = stored(db, alpha, created.headers["Location"])
    assert spec.cron == "" and spec.every_seconds == 90 and spec.at is None
    assert spec.start_at == parse_instant("2026-12-24T18:00:00+01:00")
    assert spec.end_at == parse_instant("2027-01-01T00:00:00Z")
    assert spec.overlap is Overlap.SKIP and spec.dst_gap is None


async def test_an_interval_without_start_is_anchored_at_creation(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post(
        "/schedules/new", schedule_form(kind="every", every="15m", start_at="", end_at="")
    )
    spec = stored(db, alpha, created.headers["Location"])
    assert spec.every_seconds == 900 and spec.start_at == START - START % 1000
    assert spec.end_at is None


async def test_create_a_one_off(browser: Browser, alpha: Tenant, db: Database) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post(
        "/schedules/new",
        schedule_form(kind="at", at="2026-12-24 18:00", timezone=BERLIN, dst_gap="skip"),
    )
    assert created.status == 302, created.text
    spec = stored(db, alpha, created.headers["Location"])
    assert spec.at == parse_instant("2026-12-24T17:00:00Z") and spec.cron == ""
    assert spec.dst_gap is None  # a cron's DST policy is not sent with another kind


async def test_a_one_off_at_a_wall_time_that_does_not_exist_is_refused_on_its_field(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    gap = await browser.post(
        "/schedules/new", schedule_form(kind="at", at="2026-03-29 02:30", timezone=BERLIN)
    )
    assert gap.status == 422 and 'id="at-error"' in gap.text
    assert "does not exist in Europe/Berlin" in gap.text
    blank = await browser.post("/schedules/new", schedule_form(kind="at", at=""))
    assert blank.status == 422 and 'id="at-error"' in blank.text
    assert 'id="cron-error"' not in blank.text  # one message, on the field that is blank
    assert nothing_stored(db, alpha)


async def test_a_templated_payload(browser: Browser, alpha: Tenant, db: Database) -> None:
    await browser.sign_in(alpha.editor)
    template = '{"for": "{{scheduled_for}}", "id": "{{schedule_id}}"}'
    created = await browser.post(
        "/schedules/new", schedule_form(payload=template, templated="1", templated_shown="1")
    )
    assert created.status == 302, created.text
    spec = stored(db, alpha, created.headers["Location"])
    assert spec.templated
    assert json.loads(spec.body) == json.loads(template)
    form = await browser.get("/schedules/new")
    assert "{{previous_scheduled_for}}" in form.text and "{{run_id}}" in form.text  # the hint
    typo = await browser.post(
        "/schedules/new",
        schedule_form(payload='{"for": "{{scheduled_fro}}"}', templated="1", templated_shown="1")
        | {"form_key": "t" * 43},
    )
    assert typo.status == 422 and 'id="payload-error"' in typo.text
    assert "scheduled_fro" in typo.text


async def test_a_retry_policy(browser: Browser, alpha: Tenant, db: Database) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post(
        "/schedules/new",
        schedule_form(max_attempts="4", backoff="10, 60, 600", max_age_seconds="3600"),
    )
    assert created.status == 302, created.text
    spec = stored(db, alpha, created.headers["Location"])
    assert spec.retry == RetryPolicy(max_attempts=4, backoff=(10, 60, 600), window_ms=3_600_000)


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"backoff": "10, abc"}, "backoff", "entry 2 is &#34;abc&#34;"),
        ({"backoff": "10, 0"}, "backoff", "entry 2 is 0"),
        ({"backoff": '{"initial": 10, "factor": 20, "max": 60}'}, "backoff", "factor must be"),
        ({"max_age_seconds": "0"}, "max_age_seconds", "is 0"),
        ({"kind": "every", "every": "90x"}, "every", "a whole number and a unit"),
        ({"kind": "every", "every": "400d"}, "every", "the longest interval"),
        ({"start_at": "2026-06-01 00:00", "end_at": "2026-05-01 00:00"}, "end_at", "after"),
        ({"start_at": "tomorrow"}, "start_at", "RFC 3339"),
        ({"overlap": "sometimes"}, "overlap", "must be one of"),
        ({"dst_fold": "middle"}, "dst_fold", "must be"),
    ],
)
async def test_each_new_fields_api_error_shows_on_its_input(
    browser: Browser,
    alpha: Tenant,
    db: Database,
    fields: dict[str, str],
    field: str,
    said: str,
) -> None:
    await browser.sign_in(alpha.editor)
    page = await browser.post("/schedules/new", schedule_form(**fields))
    assert page.status == 422
    assert f'id="{field}-error"' in page.text, page.text
    error = page.text.split(f'id="{field}-error">')[1].split("</p>")[0]
    assert said in error
    assert f'id="{field}"' in page.text and f'aria-describedby="{field}-error' in page.text
    for name, value in fields.items():  # what was typed is kept (a select has no other)
        if name not in ("kind", "overlap", "dst_fold"):
            assert f'value="{escape(value)}"' in page.text
    assert nothing_stored(db, alpha)


def _spec(**fields: object) -> ScheduleSpec:
    document = {
        "name": "kept",
        "target_url": "https://hooks.example.com/report",
        "payload": {"kind": "report"},
    } | fields
    return parse_schedule(document, policy=AddressPolicy())


@pytest.mark.parametrize(
    "spec",
    [
        _spec(cron="30 2 * * *", timezone=BERLIN, dst={"gap": "skip", "fold": "last"}),
        _spec(cron="*/5 * * * *", timezone="UTC", dst={"fold": "first"}, overlap="buffer_one"),
        _spec(
            at="2026-12-24T18:00:00+01:00",
            timezone=BERLIN,
            start_at="2026-12-01T00:00:00Z",
            end_at="2026-12-31T00:00:00Z",
        ),
        # an interval anchored in the second of two 02:30s (Berlin's clocks go back)
        _spec(
            every="90s",
            timezone=BERLIN,
            start_at="2026-10-25T02:30:00+01:00",
            end_at="2027-10-25T00:00:00Z",
            overlap="skip",
        ),
        _spec(
            cron="0 3 * * *",
            payload=None,
            payload_template={"for": "{{scheduled_for}}", "since": "{{window_start}}"},
            retry={
                "max_attempts": 5,
                "backoff": {"initial": 10, "factor": 2.5, "max": 3600},
                "max_age_seconds": 7200,
                "non_retryable_status": [400, 422],
            },
            headers={"X-Team": "ops"},
            content_type="application/vnd.report+json",
            jitter_seconds=30,
            catchup={"policy": "all", "window_seconds": 60},
            timeout_seconds=5,
        ),
        _spec(cron="0 3 * * *", retry={"backoff": [1, 2, 30], "retry_on_status": [503]}),
        _spec(cron="0 3 * * *", body="plain text", content_type="text/plain", payload=None),
    ],
    ids=["cron-dst", "cron-buffer", "at", "every-fold", "templated-retry", "list-backoff", "body"],
)
async def test_saving_the_edit_form_unchanged_changes_nothing(
    browser: Browser, alpha: Tenant, db: Database, spec: ScheduleSpec
) -> None:
    if spec.every_seconds is not None:
        assert spec.start_at == parse_instant("2026-10-25T01:30:00Z")  # the later 02:30
    created = db.write_now(create_schedule, tenant_id=alpha.id, spec=spec, now=START)
    await browser.sign_in(alpha.editor)
    edit = await browser.get(f"/schedules/{created.id}/edit")
    fields = submitted_fields(edit.text)
    assert fields["kind"] == kind_of(spec).value
    saved = await browser.post(f"/schedules/{created.id}/edit", fields)
    assert saved.status == 302, saved.text
    after = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=created.id)
    assert after is not None and after.spec == created.spec
    # and a real change of one new field is saved (the form is not simply ignored)
    changed = await browser.post(
        f"/schedules/{created.id}/edit", fields | {"overlap": "allow", "name": "renamed"}
    )
    assert changed.status == 302, changed.text
    final = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=created.id)
    assert final is not None
    assert final.spec == dataclasses.replace(spec, name="renamed", overlap=Overlap.ALLOW)


async def test_the_edit_form_switches_kinds_and_clears_a_bound(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    spec = _spec(
        cron="0 3 * * *", timezone=BERLIN, dst={"gap": "skip"}, end_at="2027-01-01T00:00:00Z"
    )
    created = db.write_now(create_schedule, tenant_id=alpha.id, spec=spec, now=START)
    await browser.sign_in(alpha.editor)
    fields = submitted_fields((await browser.get(f"/schedules/{created.id}/edit")).text)
    saved = await browser.post(
        f"/schedules/{created.id}/edit", fields | {"kind": "every", "every": "2h", "end_at": ""}
    )
    assert saved.status == 302, saved.text
    after = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=created.id)
    assert after is not None
    assert after.spec.every_seconds == 7200 and after.spec.cron == ""
    assert after.spec.end_at is None and after.spec.dst_gap is None


async def test_the_preview_of_an_interval_a_one_off_and_a_cron(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.viewer)
    every = await browser.post(
        "/schedules/preview", {"kind": "every", "every": "90s", "timezone": "UTC"}
    )
    anchor = START - START % 1000  # anchored at now's second, as a create would
    for k in range(1, 6):
        assert format_instant(anchor + k * 90_000) in every.text
    assert 'class="description"' not in every.text

    at = await browser.post(
        "/schedules/preview",
        {"kind": "at", "at": "2026-12-24 18:00", "timezone": BERLIN, "cron": "61 * * * *"},
    )
    assert format_instant(parse_instant("2026-12-24T17:00:00Z")) in at.text
    assert "2026-12-24 18:00:00 CET" in at.text and at.text.count("<time ") == 1
    far = await browser.post(
        "/schedules/preview", {"kind": "at", "at": "2028-01-01T00:00:00Z", "timezone": "UTC"}
    )
    assert "<code>no_fire_within_year</code>" in far.text

    cron = await browser.post(
        "/schedules/preview",
        {"kind": "cron", "cron": "0 3 1 * 1", "timezone": "UTC", "jitter_seconds": "0"},
    )
    assert 'class="description"' in cron.text and "<code>dom_dow_both</code>" in cron.text
    bad = await browser.post("/schedules/preview", {"kind": "every", "every": "soon"})
    assert "every: " in bad.text and "<table" not in bad.text
    bounded = await browser.post(
        "/schedules/preview",
        {
            "kind": "every",
            "every": "1h",
            "start_at": "2026-06-01 00:00",
            "end_at": "2026-06-01 02:00",
            "timezone": BERLIN,
        },
    )
    assert bounded.text.count("<time ") == 3  # 00:00, 01:00, 02:00 local: the bounds hold


async def test_the_preview_marks_a_dst_gap_and_warns_with_its_code(
    browser: Browser, alpha: Tenant, clock: FakeClock
) -> None:
    clock.now = parse_instant("2026-03-27T00:00:00Z")  # two days before Berlin's DST
    await browser.sign_in(alpha.viewer)
    fragment = await browser.post(
        "/schedules/preview",
        {"kind": "cron", "cron": "30 2 * * *", "timezone": BERLIN, "dst_gap": "", "dst_fold": ""},
    )
    assert "02:30 does not exist on 2026-03-29: runs at 03:00" in fragment.text
    assert "<code>time_in_dst_gap</code>" in fragment.text
    skipped = await browser.post(
        "/schedules/preview",
        {"kind": "cron", "cron": "30 2 * * *", "timezone": BERLIN, "dst_gap": "skip"},
    )
    assert "2026-03-29" not in skipped.text.split("<code>time_in_dst_gap</code>")[0]
    assert "does not run that day (dst.gap: skip)" in skipped.text
    jitter = await browser.post(
        "/schedules/preview",
        {"kind": "every", "every": "30s", "timezone": "UTC", "jitter_seconds": "60"},
    )
    assert "<code>jitter_exceeds_period</code>" in jitter.text


async def test_the_preview_button_previews_without_javascript(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    new = submitted_fields((await browser.get("/schedules/new")).text)
    shown = await browser.post(
        "/schedules/preview",
        new | {"kind": "every", "every": "90s", "jitter_seconds": "120", "full_preview": "1"},
    )
    assert shown.status == 200 and "<html" in shown.text  # the whole form, as typed
    assert 'value="90s"' in shown.text and f'value="{new["form_key"]}"' in shown.text
    assert shown.text.count("<time ") == 5 and "<code>jitter_exceeds_period</code>" in shown.text
    assert 'action="/schedules/new"' in shown.text and nothing_stored(db, alpha)

    created = db.write_now(
        create_schedule, tenant_id=alpha.id, spec=_spec(cron="0 3 * * *"), now=START
    )
    fields = submitted_fields((await browser.get(f"/schedules/{created.id}/edit")).text)
    again = await browser.post(
        "/schedules/preview", fields | {"cron": "0 25 * * *", "full_preview": "1"}
    )
    assert f'action="/schedules/{created.id}/edit"' in again.text
    assert 'name="version" value="1"' in again.text and 'value="0 25 * * *"' in again.text
    assert "cron: " in again.text and "<table" not in again.text
    viewer = Browser(browser.app)
    await viewer.sign_in(alpha.viewer)
    assert (await viewer.post("/schedules/preview", fields | {"full_preview": "1"})).status == 403


async def test_unchecking_the_template_box_saves_a_plain_payload(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    spec = _spec(cron="0 3 * * *", payload=None, payload_template={"for": "{{run_id}}"})
    created = db.write_now(create_schedule, tenant_id=alpha.id, spec=spec, now=START)
    await browser.sign_in(alpha.editor)
    fields = submitted_fields((await browser.get(f"/schedules/{created.id}/edit")).text)
    assert fields["templated"] == "1" and fields["templated_shown"] == "1"
    del fields["templated"]  # the box unchecked: a browser sends nothing for it
    saved = await browser.post(f"/schedules/{created.id}/edit", fields)
    assert saved.status == 302, saved.text
    after = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=created.id)
    assert after is not None and not after.spec.templated
    assert json.loads(after.spec.body) == {"for": "{{run_id}}"}  # sent literally now
