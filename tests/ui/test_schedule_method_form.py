"""The schedule form's "Method" (docs/schedules.md, "HTTP methods"): a GET or DELETE is
made and edited without a body (the hidden payload box is not sent), the schedule page
says so, saving unchanged changes nothing, switching back to a body method takes the
payload, and a method the API refuses lands on the field."""

from __future__ import annotations

import html

from appliance.core.addresses import AddressPolicy
from appliance.core.runs import AttemptOutcome, Transition
from appliance.core.schedule_input import parse_schedule
from appliance.core.schedules import Method
from appliance.store.claims import claim_runs
from appliance.store.completions import Completion, complete_run
from appliance.store.incarnations import register_incarnation
from appliance.store.infra.database import Database
from appliance.store.schedules import create_schedule, get_schedule, list_schedules
from appliance.store.usecases.manual import trigger_schedule
from tests.api.conftest import START
from tests.ui.conftest import Browser, Tenant, schedule_form, submitted_fields


def created_id(location: str) -> str:
    return location.split("/")[2].split("?")[0]


async def test_a_get_is_made_shown_kept_and_switched_back(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    blank = await browser.get("/schedules/new")
    assert submitted_fields(blank.text)["method"] == "POST"
    # The payload box still holds (and posts) what was typed: a GET does not send it.
    created = await browser.post("/schedules/new", schedule_form(method="GET"))
    assert created.status == 302, created.text[:800]
    sid = created_id(created.headers["Location"])
    stored = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid)
    assert (stored.spec.method, stored.spec.body, stored.spec.content_type) == (Method.GET, b"", "")
    page = await browser.get(f"/schedules/{sid}")
    assert '<code id="schedule-method">GET</code> (no body)' in page.text
    assert "None: no body is sent with GET." in page.text and 'id="content-type"' not in page.text

    edit = await browser.get(f"/schedules/{sid}/edit")
    fields = submitted_fields(edit.text)
    assert fields["method"] == "GET" and fields["payload"] == ""
    assert (await browser.post(f"/schedules/{sid}/edit", fields)).status == 302
    assert db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid) == stored

    back = fields | {"method": "PUT", "payload": '{"n": 2}'}
    assert (await browser.post(f"/schedules/{sid}/edit", back)).status == 302
    put = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid).spec
    assert (put.method, put.body, put.content_type) == (Method.PUT, b'{"n":2}', "application/json")


async def test_an_edit_to_delete_drops_the_body(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    created = await browser.post("/schedules/new", schedule_form())
    sid = created_id(created.headers["Location"])
    edit = await browser.get(f"/schedules/{sid}/edit")
    assert submitted_fields(edit.text)["method"] == "POST"
    saved = await browser.post(
        f"/schedules/{sid}/edit", submitted_fields(edit.text) | {"method": "DELETE"}
    )
    assert saved.status == 302, saved.text[:800]
    spec = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid).spec
    assert (spec.method, spec.body, spec.content_type) == (Method.DELETE, b"", "")


async def test_a_method_the_api_refuses_lands_on_the_field(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    page = await browser.post("/schedules/new", schedule_form(method="HEAD"))
    assert page.status == 422
    assert 'id="method-error"' in page.text and "must be one of POST, PUT" in page.text
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []


async def test_a_body_method_without_a_payload_is_refused_on_the_payload(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    await browser.sign_in(alpha.editor)
    page = await browser.post("/schedules/new", schedule_form(method="PATCH", payload=""))
    assert page.status == 422 and 'id="payload-error"' in page.text
    assert db.read_now(list_schedules, tenant_id=alpha.id, limit=10) == []


async def test_a_get_runs_page_shows_no_body_and_a_curl_without_data(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    spec = parse_schedule(
        {"name": "rollup", "cron": "0 3 1 1 *", "target_url": "https://h.example/r",
         "method": "GET"},
        policy=AddressPolicy(),
    )  # fmt: skip
    made = db.write_now(create_schedule, tenant_id=alpha.id, spec=spec, now=START)
    run, _ = db.write_now(trigger_schedule, tenant_id=alpha.id, schedule_id=made.id, now=START)
    owner = db.write_now(register_incarnation, pid=1, now=START)
    (claimed,) = db.write_now(claim_runs, owner=owner, now=START, lease_ms=30_000, limit=1).runs
    done = Completion(
        outcome=AttemptOutcome.OK, transition=Transition.SUCCEED, due_at=None,
        failure_reason=None, http_status=200, error=None, latency_ms=1,
        response_excerpt="ok", signed_at=START // 1000,
    )  # fmt: skip
    assert db.write_now(complete_run, run=claimed, completion=done, now=START + 5)
    await browser.sign_in(alpha.viewer)
    page = (await browser.get(f"/runs/{run.id}")).text
    assert "<dt>Method</dt><dd><code>GET</code></dd>" in page
    assert '<p id="request-body">None: no body is sent with GET' in page
    headers = page.split('id="request-headers"', 1)[1].split("</dl>", 1)[0]
    assert "X-Signature" in headers and "Content-Type" not in headers
    curl = html.unescape(page.split('id="curl-command">', 1)[1].split("</pre>", 1)[0])
    assert curl.startswith("curl --request GET --url https://h.example/r")
    assert "--data-raw" not in curl and "Expect:" not in curl
