"""The charts and the delivery inspector on their pages: the dashboard's tables say the
seeded runs' numbers, the schedule page shows its strip, payload and retry policy, and the
run page shows the request as sent with its secret masked and a curl command."""

from __future__ import annotations

import html
import re

from appliance.core.runs import AttemptOutcome, Transition
from appliance.core.secret_headers import MASK
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from tests.api.conftest import START, Api, FakeClock, deliver_due, load_schedule, plan_runs
from tests.ui.conftest import Browser, Tenant

SECRET = "Bearer s3cr3t-receiver-token"
HEADERS = {"Authorization": SECRET, "X-Team": "payments"}
MINUTE = 60_000
HOUR = 60 * MINUTE


def retry_then_succeed(db: Database, *, now: int) -> str:
    """Claim what is due at ``now``, answer 503 (retry a minute later), then 200."""
    owner = db.write_now(register_incarnation, pid=2, now=now)
    (run,) = db.write_now(claim_runs, owner=owner, now=now, lease_ms=MINUTE, limit=10).runs
    busy = Completion(
        outcome=AttemptOutcome.RETRYABLE,
        transition=Transition.RETRY,
        due_at=now + MINUTE,
        failure_reason=None,
        http_status=503,
        error="HTTP 503",
        latency_ms=7,
        response_excerpt="busy",
    )
    assert db.write_now(complete_run, run=run, completion=busy, now=now + 7)
    deliver_due(db, now=now + MINUTE)
    return run.run_id


async def seeded(browser: Browser, alpha: Tenant, db: Database, clock: FakeClock) -> dict[str, str]:
    """Four runs in the hour after START: one succeeded 1 s late, one failed (410) 2 s
    late, one succeeded after a retry, one still pending."""
    api = Api(app=browser.app, key=alpha.tenant.api_key, tenant_id=alpha.id)
    schedule_id = str((await api.create(headers=HEADERS, cron="*/5 * * * *"))["id"])
    schedule = load_schedule(db, alpha.id, schedule_id)
    first, second, third, _ = plan_runs(db, schedule, after=START, count=4)
    ok = deliver_due(db, now=first + 1_000)
    gone = deliver_due(db, now=second + 2_000, status=410)
    retried = retry_then_succeed(db, now=third + 500)
    clock.now = START + HOUR
    return {"schedule": schedule_id, "ok": ok[0], "gone": gone[0], "retried": retried}


def table_rows(text: str, table_id: str) -> list[list[str]]:
    table = text.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return [
        [html.unescape(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


async def test_the_dashboard_charts_say_the_seeded_numbers(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    await seeded(browser, alpha, db, clock)
    await browser.sign_in(alpha.viewer)
    page = (await browser.get("/")).text
    assert table_rows(page, "deliveries-table") == [["10:00", "1", "1", "1"]]
    assert table_rows(page, "lateness-table") == [["10:00", "2", "1 s", "2 s"]]
    assert 'role="img"' in page
    assert (
        'aria-label="Deliveries per hour, last 24 hours (UTC): 1 succeeded,'
        ' 1 succeeded after retries, 1 failed"'
    ) in page
    assert "charts.css" in page


async def test_a_dashboard_with_no_delivery_says_so(browser: Browser, alpha: Tenant) -> None:
    await browser.sign_in(alpha.viewer)
    page = (await browser.get("/")).text
    assert "No deliveries yet in the last 24 hours." in page
    assert 'id="chart-deliveries"' not in page and 'id="deliveries-table"' not in page


async def test_the_schedule_page_shows_its_strip_payload_and_retry_policy(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    ids = await seeded(browser, alpha, db, clock)
    await browser.sign_in(alpha.viewer)
    page = (await browser.get(f"/schedules/{ids['schedule']}")).text
    strip = page.split('id="run-strip"', 1)[1].split("</ol>", 1)[0]
    links = re.findall(r'<a class="(\w+)" href="/runs/(run_\w+)"', strip)
    assert links[:3] == [
        ("succeeded", ids["ok"]),
        ("failed", ids["gone"]),
        ("succeeded", ids["retried"]),
    ]
    assert links[3][0] == "pending" and len(links) == 4
    assert "succeeded, 20" in strip  # the text alternative: state and time
    assert [row[1] for row in table_rows(page, "lateness-table")] == ["1000 ms", "2000 ms"]
    assert 'class="sparkline"' in page
    payload = page.split('id="payload">', 1)[1].split("</pre>", 1)[0]
    assert html.unescape(payload) == '{"report":"nightly","n":1}'
    assert "application/json" in page
    policy = page.split('id="retry-policy"', 1)[1].split("</dl>", 1)[0]
    assert "<dt>Attempts</dt><dd>8</dd>" in policy and "Gives up after" in policy
    assert "s3cr3t" not in page


async def test_the_run_page_inspects_the_delivery_with_secrets_masked(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    ids = await seeded(browser, alpha, db, clock)
    await browser.sign_in(alpha.viewer)
    page = (await browser.get(f"/runs/{ids['retried']}")).text
    assert "s3cr3t" not in page and SECRET not in page
    headers = page.split('id="request-headers"', 1)[1].split("</dl>", 1)[0]
    assert f"<dt>Authorization</dt><dd>{html.escape(MASK)}</dd>" in headers
    assert "<dt>X-Team</dt><dd>payments</dd>" in headers
    assert "<dt>X-Attempt</dt><dd>2</dd>" in headers and "X-Signature" in headers
    assert 'id="request-url">https://hooks.example.com/steeple<' in page
    curl = html.unescape(page.split('id="curl-command">', 1)[1].split("</pre>", 1)[0])
    assert curl.startswith("curl --request POST --url https://hooks.example.com/steeple")
    assert f"'Authorization: {MASK}'" in curl
    assert 'data-copy="curl-command"' in page
    assert "Decision: HTTP 503: retryable; retried as attempt 2." in page
    assert "Decision: HTTP 200: received; the run succeeded." in page
    assert "does not store response headers" in page
    failed = (await browser.get(f"/runs/{ids['gone']}")).text
    assert "Decision: HTTP 410: not retried (gone); the run failed." in failed


async def test_a_run_never_attempted_says_nothing_was_sent(
    browser: Browser, alpha: Tenant, db: Database, clock: FakeClock
) -> None:
    ids = await seeded(browser, alpha, db, clock)
    await browser.sign_in(alpha.viewer)
    schedule = (await browser.get(f"/schedules/{ids['schedule']}")).text
    pending = re.findall(r'<a class="pending" href="/runs/(run_\w+)"', schedule)[0]
    page = (await browser.get(f"/runs/{pending}")).text
    assert "No attempt yet: nothing was sent." in page and 'id="curl-command"' not in page
