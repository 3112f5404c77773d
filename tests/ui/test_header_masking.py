"""The schedule page shows the tenant headers with secret-bearing values masked, to a
viewer as to an editor; saving the edit form (which carries no headers) keeps them."""

from __future__ import annotations

from appliance.core.secret_headers import MASK
from appliance.store.infra.database import Database
from tests.api.conftest import Api, load_schedule
from tests.ui.conftest import Browser, Tenant, submitted_fields

SECRET = "Bearer s3cr3t-receiver-token"
HEADERS = {"Authorization": SECRET, "X-Session-Id": "sess-98765", "X-Team": "payments"}


async def scheduled(browser: Browser, alpha: Tenant) -> str:
    api = Api(app=browser.app, key=alpha.tenant.api_key, tenant_id=alpha.id)
    return str((await api.create(headers=HEADERS))["id"])


async def test_a_viewer_sees_the_headers_masked(browser: Browser, alpha: Tenant) -> None:
    schedule_id = await scheduled(browser, alpha)
    await browser.sign_in(alpha.viewer)
    shown = await browser.get(f"/schedules/{schedule_id}")
    assert shown.status == 200
    assert f"Authorization: {MASK}".replace("<", "&lt;").replace(">", "&gt;") in shown.text
    assert "X-Team: payments" in shown.text
    assert SECRET not in shown.text and "s3cr3t" not in shown.text and "98765" not in shown.text


async def test_an_editor_saving_the_form_keeps_the_secret(
    browser: Browser, alpha: Tenant, db: Database
) -> None:
    schedule_id = await scheduled(browser, alpha)
    await browser.sign_in(alpha.editor)
    assert "s3cr3t" not in (await browser.get(f"/schedules/{schedule_id}")).text
    form = await browser.get(f"/schedules/{schedule_id}/edit")
    assert "s3cr3t" not in form.text
    fields = submitted_fields(form.text) | {"name": "renamed"}
    saved = await browser.post(f"/schedules/{schedule_id}/edit", fields)
    assert saved.status == 302, saved.text
    stored = load_schedule(db, alpha.id, schedule_id)
    assert stored.spec.name == "renamed" and dict(stored.spec.headers) == HEADERS
