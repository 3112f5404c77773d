"""The schedule form edits a few fields of the API's document; saving it keeps what it
does not show — a retry policy's backoff and status list, and a payload template (which
the payload box shows and saves as a template)."""

from __future__ import annotations

import json

from appliance.core.addresses import AddressPolicy
from appliance.core.retry import RetryPolicy
from appliance.core.schedule_input import parse_schedule
from appliance.store.infra.database import Database
from appliance.store.schedules import create_schedule, get_schedule
from tests.api.conftest import START
from tests.ui.conftest import Browser, Tenant, schedule_form


async def test_saving_the_form_keeps_the_template_and_the_retry_policy(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    spec = parse_schedule(
        {
            "name": "templated",
            "cron": "0 3 * * *",
            "target_url": "https://hooks.example.com/report",
            "payload_template": {"for": "{{scheduled_for}}"},
            "retry": {"backoff": [1, 2], "non_retryable_status": [400]},
        },
        policy=AddressPolicy(),
    )
    sid = db.write_now(create_schedule, tenant_id=alpha.id, spec=spec, now=START).id
    await browser.sign_in(alpha.editor)
    edit = await browser.get(f"/schedules/{sid}/edit")
    assert "{{scheduled_for}}" in edit.text
    saved = await browser.post(
        f"/schedules/{sid}/edit",
        schedule_form(
            name="renamed",
            payload='{"for": "{{scheduled_for}}", "to": "{{window_end}}"}',
            max_attempts="4",
        )
        | {"version": "1"},
    )
    assert saved.status == 302, saved.text
    stored = db.read_now(get_schedule, tenant_id=alpha.id, schedule_id=sid)
    assert stored is not None and stored.spec.name == "renamed"
    assert stored.spec.templated
    assert json.loads(stored.spec.body) == {"for": "{{scheduled_for}}", "to": "{{window_end}}"}
    assert stored.spec.retry == RetryPolicy(
        max_attempts=4, backoff=(1, 2), non_retryable_status=frozenset({400})
    )
