"""The UI says what the API says (issue 22, "The UI tells the truth"): a fired one-off is
``completed``, a paused schedule lists no times as if they fire, a retrying run is the
last outcome, the form's catch-up default is the API's, the dashboard's "Next up" lists
schedules, and the wording counts right."""

from __future__ import annotations

import re
from pathlib import Path

import appliance.ui
from appliance.core.instants import format_instant
from appliance.core.runs import AttemptOutcome, RunState, Transition
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.schedules import get_schedule
from appliance.store.usecases.plan_pass import PlannerConfig, plan_once
from appliance.store.users import Role, create_user
from tests.api.conftest import START, FakeClock, deliver_due, plan_runs
from tests.ui.conftest import _HASH, Browser, Tenant, schedule_form

SECOND = 1000


async def create(browser: Browser, **fields: str) -> str:
    created = await browser.post("/schedules/new", schedule_form(**fields))
    assert created.status == 302, created.text
    return str(created.headers["Location"]).split("/")[2].split("?")[0]


def badge(text: str) -> list[str]:
    return re.findall(r'<span class="badge [a-z_]+">([a-z_]+)</span>', text)


async def test_a_fired_one_off_is_completed_in_the_list_and_on_its_page(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    await browser.sign_in(alpha.editor)
    at = START - START % 1000 + 3600 * SECOND
    one_off = await create(browser, kind="at", cron="", at=format_instant(at), name="once")
    db.write_now(plan_once, now=at - SECOND, config=PlannerConfig())
    clock.advance(at - START)
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=one_off)
    assert schedule is not None and schedule.next_fire_at is None
    listing = await browser.get("/schedules")
    assert badge(listing.text)[0] == "completed"
    assert "Pause once" not in listing.text
    shown = await browser.get(f"/schedules/{one_off}")
    assert badge(shown.text)[0] == "completed"
    assert 'action="/schedules/' + one_off + '/pause"' not in shown.text
    for status in ("active", "paused", "completed"):
        assert f'<option value="{status}"' in listing.text
    completed = await browser.get("/schedules?status=completed")
    assert "once" in completed.text
    active = await browser.get("/schedules?status=active")
    assert 'href="/schedules/' + one_off + '"' not in active.text


async def test_a_paused_schedule_lists_no_times_as_if_they_fire(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    schedule_id = await create(browser, kind="every", cron="", every="7s")
    await browser.post(f"/schedules/{schedule_id}/pause", {"note": ""})
    shown = await browser.get(f"/schedules/{schedule_id}")
    assert "nothing fires until it is resumed" in shown.text
    section = shown.text.split('id="upcoming"')[1].split("</section>")[0]
    assert "(in " not in section
    assert "would fire if resumed now" in section


def retry_twice(db: Database, now: int) -> None:
    """Two attempts of the due run fail with 503; it waits for its third."""
    for attempt in range(2):
        owner = db.write_now(register_incarnation, pid=1, now=now)
        batch = db.write_now(claim_runs, owner=owner, now=now, lease_ms=60_000, limit=10)
        assert len(batch.runs) == 1, attempt
        completion = Completion(
            outcome=AttemptOutcome.RETRYABLE,
            transition=Transition.RETRY,
            due_at=now + 1000,
            failure_reason=None,
            http_status=503,
            error="HTTP 503",
            latency_ms=12,
            response_excerpt="busy",
        )
        assert db.write_now(complete_run, run=batch.runs[0], completion=completion, now=now)
        now += 1000


async def test_a_run_waiting_to_retry_is_the_last_outcome(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    await browser.sign_in(alpha.editor)
    at = START - START % 1000 + 60 * SECOND
    await create(browser, kind="at", cron="", at=format_instant(at), name="flaky")
    db.write_now(plan_once, now=at - SECOND, config=PlannerConfig())
    retry_twice(db, at)
    clock.advance(at + 2000 - START)
    listing = await browser.get("/schedules")
    assert "none yet" not in listing.text
    assert RunState.RETRY_WAIT.value in badge(listing.text)
    assert "HTTP 503" in listing.text and "attempt 2 failed" in listing.text


async def test_the_form_and_the_api_default_to_the_same_catch_up(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    blank = await browser.get("/schedules/new")
    assert '<option value="all" selected' in blank.text
    form = schedule_form()
    del form["catchup_policy"]  # a form without the field: the API's default
    schedule_id = await create(browser)
    made = await browser.post("/schedules/new", form | {"form_key": "m" * 43})
    assert made.status == 302
    without = str(made.headers["Location"]).split("/")[2].split("?")[0]
    spec = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=without)
    assert spec is not None and spec.spec.catchup_policy.value == "all"
    assert schedule_id != without


async def test_next_up_lists_distinct_schedules_by_their_next_occurrence(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    await create(browser, kind="every", cron="", every="7s", name="fast")
    await create(browser, cron="0 3 * * *", name="nightly", form_key="n" * 43)
    dashboard = await browser.get("/")
    section = dashboard.text.split('id="next"')[1].split("</section>")[0]
    assert section.count(">fast</a>") == 1
    assert section.count(">nightly</a>") == 1


async def test_the_preview_names_each_zone_once_and_styles_a_refusal(
    browser: Browser, alpha: Tenant
) -> None:
    await browser.sign_in(alpha.editor)
    utc = await browser.post("/schedules/preview", schedule_form(timezone="UTC"))
    assert "in UTC and in UTC" not in utc.text and "in UTC" in utc.text
    refused = await browser.post(
        "/schedules/preview", schedule_form(target_url="http://127.0.0.1/x")
    )
    assert 'role="alert"' in refused.text and 'class="verdict field-error"' in refused.text


async def test_counts_say_one_run_not_one_runs(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    await browser.sign_in(alpha.editor)
    schedule_id = await create(browser, cron="* * * * * *")
    schedule = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=schedule_id)
    assert schedule is not None
    plan_runs(db, schedule, after=START, count=1)
    clock.advance(5000)
    assert len(deliver_due(db, now=clock.now, status=410)) == 1
    clock.advance(1000)
    listed = await browser.get("/failed")
    assert "newest occurrence first (1 run)</caption>" in listed.text  # not "at most 1 shown"
    confirm = await browser.get("/failed/replay-all")
    assert "exactly <strong>1</strong> failed run," in confirm.text
    done = await browser.post(
        "/failed/replay-all", {"as_of": format_instant(clock.now // 1000 * 1000)}
    )
    assert done.headers["Location"] == "/failed?replayed=1"
    replayed = await browser.get("/failed?replayed=1")
    assert "1 run replayed with its same idempotency key." in replayed.text
    dashboard = await browser.get("/")
    assert "1 runs" not in dashboard.text + replayed.text + confirm.text
    page = await browser.get(f"/schedules/{schedule_id}")
    assert "The last 1 run, oldest first" in page.text
    account = await browser.get("/settings/account")
    assert "0 other sessions are open" in account.text
    events = await browser.get("/events")
    shown = re.search(r"The newest (\d+) (events?), newest first", events.text)
    assert shown is not None and shown.group(2) == ("event" if shown.group(1) == "1" else "events")


COUNT_THEN_NOUN = re.compile(r"\{\{(?P<expr>[^}]*)\}\} (?P<noun>[a-z]+s)\b")
UNITS = {"ms", "s"}  # "1 s" is right: a unit symbol has no plural


def test_every_count_in_a_template_goes_through_the_plural_rule() -> None:
    """``{{ n }} runs`` says "1 runs"; a count followed by a plural noun must use
    ``counted`` or ``plural`` (appliance/ui/render.py), so a new one cannot slip in."""
    templates = Path(appliance.ui.__file__).parent / "web" / "templates"
    bare = [
        f"{path.name}: {found.group(0)}"
        for path in sorted(templates.glob("*.html"))
        for found in COUNT_THEN_NOUN.finditer(path.read_text())
        if found.group("noun") not in UNITS
        and not re.search(r"\|\s*(counted|plural)\b", found.group("expr"))
    ]
    assert bare == []


async def test_the_operator_tenant_list_names_tenants_with_their_ids_copyable(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    db.write_now(
        create_user,
        email="ops@example.com",
        tenant_id=None,
        role=Role.OWNER,
        operator=True,
        password_hash=_HASH,
        now=START,
    )
    await browser.sign_in("ops@example.com")
    listing = await browser.get("/admin/tenants")
    assert f"<td><code>{alpha.id}</code></td>" not in listing.text
    assert f'<span title="{alpha.id}">alpha</span>' in listing.text
    assert f'class="visually-hidden">{alpha.id}</code>' in listing.text
    created = await browser.post("/admin/tenants", {"name": "gamma"})
    assert created.status == 201
    assert re.search(
        r'Tenant <strong title="ten_[0-9A-Za-z]+">gamma</strong> created', created.text
    )


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_a_completed_badge_has_a_colour_of_its_own_readable_light_and_dark() -> None:
    """``completed`` is neither success nor trouble: its own colour, at WCAG AA (4.5:1)
    on the page and on a panel in both schemes (axe checks the rendered badge too)."""
    css = (Path(appliance.ui.__file__).parent / "web" / "static" / "steeple.css").read_text()
    rule = re.search(r"\.badge\.completed\s*\{\s*color:\s*var\(--(?P<var>[a-z-]+)\)", css)
    assert rule is not None
    others = re.findall(r"\.badge\.[a-z_]+[^{]*\{\s*color:\s*var\(--([a-z-]+)\)", css)
    assert others.count(rule.group("var")) == 1  # no other badge shares it
    light, dark = [dict(re.findall(r"--([a-z-]+):\s*(#[0-9a-f]{6})", block)) for block in
                   re.findall(r":root\s*\{([^}]*)\}", css)[:2]]  # fmt: skip
    for scheme in (light, dark):
        colour = scheme[rule.group("var")]
        assert _contrast(colour, scheme["bg"]) >= 4.5 and _contrast(colour, scheme["panel"]) >= 4.5
